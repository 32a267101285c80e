// The values the filters offer. They mirror src/domain/model.ts; test/integration/console.test.ts
// fails when the two drift apart.
export const INTENT_STATUSES = ['CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLING', 'SETTLED', 'FAILED', 'MANUAL_REVIEW', 'CANCELED', 'EXPIRED'];
export const CHANNELS = ['INTERNAL_P2P', 'PSPX_TRANSFER', 'MERCHANT_INVOICE', 'SERVICE_TRANSFER', 'ADMIN'];
export const OPERATION_TYPES = [
  'P2P_TRANSFER',
  'PSPX_WITHDRAWAL',
  'THAI_QR_PAY',
  'WITHDRAWAL',
  'QP_TOPUP',
  'MINIAPP_CHARGE',
  'MINIAPP_CREDIT',
  'SERVICE_DEPOSIT',
  'ADMIN_TRANSFER',
  'INVOICE_PAYMENT',
  'NFC_CHARGE',
];
