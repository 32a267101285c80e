import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CashManagementEndOfDayReport } from 'iso20022.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runAudit } from '../../src/domain/audit/audit.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { jsonStatement, markBetween, type StatementEntry as Entry, statementPath } from '../support/statements.js';
import { createUser, topUp } from '../support/payments.js';

// docs/rules.md R57 and R58 together: a refund's postings in the statements and the history of the
// payer and the payee carry the original's intent id and operation type and name the refund.
let t: TestApp;
const PAYER = 601;
const PAYEE = 602;
const payer = `user.${PAYER}.THB`;
const payee = `user.${PAYEE}.THB`;
const marks: string[] = [];
let intentId = '';
let refundId = '';

const get = (path: string) => t.call('GET', path);
const mark = () => markBetween(marks);
const statement = (name: string, from: string, to: string) => jsonStatement(t, name, from, to);

beforeAll(async () => {
  t = await startTestApp();
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await topUp(t, PAYER, 10_000);
  // A PRE and a POST fee, so that the refund's fees returned show on the payer's entry.
  await t.db.query(
    `INSERT INTO fee_rules (name, operation_type, expression, timing) VALUES
       ('p2p sender fee', 'P2P_TRANSFER', '[{account: ''system.revenue.THB'', amount: amount * 7 / 100}]', 'PRE'),
       ('p2p receiver fee', 'P2P_TRANSFER', '[{account: ''system.revenue.THB'', amount: amount / 33}]', 'POST')`,
  );
  await mark(); // 0
  const paid = await t.call('POST', '/intents', {
    user: PAYER,
    body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 3_300, recipientUserId: PAYEE },
  });
  expect(paid.statusCode, paid.body).toBe(201);
  expect(paid.json()).toMatchObject({ status: 'SETTLED', preFeeAmount: '231', postFeeAmount: '100' });
  intentId = paid.json().intentId as string;
  await mark(); // 1
  const refunded = await t.call('POST', `/intents/${intentId}/refunds`, {
    user: 77,
    body: { idempotencyKey: randomUUID(), reason: 'customer asked', amount: 1_600, refundFees: true },
  });
  expect(refunded.statusCode, refunded.body).toBe(201);
  // Half of what the payee was credited (3,200): half of each fee, floored, comes back too.
  expect(refunded.json()).toMatchObject({ amount: '1600', feeAmount: '165', status: 'SETTLED' });
  refundId = refunded.json().refundId as string;
  await mark(); // 2
  await sleep(5_100);
}, 90_000);
afterAll(async () => t?.close());
afterEach(async () => {
  await expectLedgerInvariants(t.db);
  expect((await runAudit(t.db)).violations).toEqual([]);
});

/** [intentId, refundId, operationType, direction, amount, feeAmount, balanceAfter] of each entry. */
const expected = (): Record<string, (string | null)[][]> => ({
  [payer]: [
    [intentId, null, 'P2P_TRANSFER', 'DEBIT', '3531', '231', '6469'],
    [intentId, refundId, 'P2P_TRANSFER', 'CREDIT', '1765', '165', '8234'],
  ],
  [payee]: [
    [intentId, null, 'P2P_TRANSFER', 'CREDIT', '3200', '100', '3200'],
    [intentId, refundId, 'P2P_TRANSFER', 'DEBIT', '1600', '0', '1600'],
  ],
});
const row = (e: Entry) => [e.intentId, e.refundId, e.operationType, e.direction, e.amount, e.feeAmount, e.balanceAfter];

describe('a P2P and its partial refund', () => {
  it('show in the payer and the payee statements with the original intent, the refund and the balances after', async () => {
    const [m0, m1, m2] = marks as [string, string, string];
    for (const [name, opening, closing] of [
      [payer, '10000', '8234'],
      [payee, '0', '1600'],
    ] as const) {
      const whole = await statement(name, m0, m2);
      expect(whole).toMatchObject({ openingBalance: opening, closingBalance: closing });
      expect(whole.entries.map(row)).toEqual(expected()[name]);
      // Adjacent statements chain, the refund in the second.
      const [first, second] = [await statement(name, m0, m1), await statement(name, m1, m2)];
      expect(first.closingBalance).toBe(second.openingBalance);
      expect([...first.entries, ...second.entries]).toEqual(whole.entries);
      expect(second.entries.map((e) => e.refundId)).toEqual([refundId]);
    }
  });

  it('answers csv and camt.053 with the same entries', async () => {
    const [m0, , m2] = marks as [string, string, string];
    for (const name of [payer, payee]) {
      const json = await statement(name, m0, m2);
      const csv = await get(statementPath(name, m0, m2, 'csv'));
      expect(csv.statusCode).toBe(200);
      const [, ...lines] = csv.body.trimEnd().split('\r\n');
      expect(lines).toEqual(json.entries.map((e) => [e.at, ...row(e).map((v) => v ?? '')].join(',')));

      const camt = await get(statementPath(name, m0, m2, 'camt053'));
      expect(camt.statusCode).toBe(200);
      const [parsed] = CashManagementEndOfDayReport.fromXML(camt.body).statements;
      expect(parsed?.entries.map((e) => [e.referenceId, Math.round(e.amount), e.creditDebitIndicator, e.proprietaryCode])).toEqual(
        expected()[name]!.map(([intent, , type, direction, amount]) => [
          intent,
          Number(amount),
          direction === 'CREDIT' ? 'credit' : 'debit',
          type,
        ]),
      );
      expect(parsed?.balances.map((b) => Math.round(b.amount))).toEqual([Number(json.openingBalance), Number(json.closingBalance)]);
    }
  });

  it('show in the payer and the payee history rows, naming the refund', async () => {
    for (const name of [payer, payee]) {
      const res = await get(`/accounts/${name}/transactions`);
      expect(res.statusCode, res.body).toBe(200);
      const rows = (res.json().transactions as Entry[]).filter((e) => e.intentId === intentId).reverse();
      // A history row's amount is the intent's or the refund's, its fee apart; a statement entry's is the posting.
      const historyRows = expected()[name]!.map((e, index) => [...e.slice(0, 4), ['3300', '1600'][index], ...e.slice(5)]);
      expect(rows.map(row)).toEqual(historyRows);
    }
  });
});
