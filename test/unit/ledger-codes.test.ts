import { describe, expect, it } from 'vitest';
import { LEDGER_CODE_BY_ACCOUNT_TYPE, LEDGER_CODE_BY_OPERATION, LEDGER_CODE_REFUND } from '../../src/domain/model.js';

// Stored ledger data carries these numbers: a transfer's code says which operation moved it, an
// account's code is compared when the account is created again. Changing one breaks that data.
describe('ledger codes', () => {
  it('of operation types are the numbers stored so far', () => {
    expect(LEDGER_CODE_BY_OPERATION).toEqual({
      P2P_TRANSFER: 1,
      PSPX_WITHDRAWAL: 2,
      THAI_QR_PAY: 3,
      WITHDRAWAL: 4,
      QP_TOPUP: 5,
      MINIAPP_CHARGE: 6,
      MINIAPP_CREDIT: 7,
      SERVICE_DEPOSIT: 8,
      ADMIN_TRANSFER: 9,
      INVOICE_PAYMENT: 10,
      NFC_CHARGE: 11,
    });
  });

  it('of refunds is the next number after the operation types, in their family (docs/rules.md R57)', () => {
    expect(LEDGER_CODE_REFUND).toBe(12);
    const transferCodes = [...Object.values(LEDGER_CODE_BY_OPERATION), LEDGER_CODE_REFUND];
    expect(new Set(transferCodes).size).toBe(transferCodes.length);
  });

  it('of account types are the numbers stored so far', () => {
    expect(LEDGER_CODE_BY_ACCOUNT_TYPE).toEqual({
      USER_WALLET: 1,
      TRANSIT: 2,
      REVENUE: 3,
      NOSTRO: 4,
      MERCHANT_WALLET: 5,
      MERCHANT_SETTLEMENT: 6,
      AGENT_WALLET: 7,
      AGENT_SETTLEMENT: 8,
      SERVICE_ACCOUNT: 9,
      EQUITY: 10,
    });
  });

  it.each([
    ['operation types', LEDGER_CODE_BY_OPERATION],
    ['account types', LEDGER_CODE_BY_ACCOUNT_TYPE],
  ])('of %s are each used once', (_, codes) => {
    const numbers = Object.values(codes);
    expect(new Set(numbers).size).toBe(numbers.length);
  });
});
