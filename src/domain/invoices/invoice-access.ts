import { apiError, assertNever } from '../errors.js';
import type { Intent } from '../intents/store/intent-store.js';
import { isInvoiceChannel } from '../channels/channels.js';

export type InvoiceAction = 'confirm' | 'cancel';

/** In-process queue key of one invoice's confirms; apart from idempotency keys (`service/key`). */
export const invoiceLockKey = (intentId: string) => `#invoice/${intentId}`;

/**
 * The invoice a confirm or cancel names, as found by its id. Another service's intent is indistinguishable from a
 * missing one (tenant isolation). Cancel errors carry no message (`{error, status?}`, docs/rules.md, Error bodies);
 * confirm keeps the standard body for these two.
 */
export function ownInvoice(intent: Intent | null, serviceId: string, intentId: string, action: InvoiceAction): Intent {
  const bare = action === 'cancel';
  if (intent === null || intent.serviceId !== serviceId) throw apiError('INTENT_NOT_FOUND', `intent ${intentId} not found`, { bare });
  if (intent.operationType === 'INVOICE_PAYMENT' && isInvoiceChannel(intent.channel)) return intent;
  switch (action) {
    case 'confirm':
      throw apiError('BAD_REQUEST', `intent ${intentId} is a ${intent.operationType} on ${intent.channel}, not an invoice`);
    case 'cancel':
      throw apiError('CANCEL_NOT_SUPPORTED', `channel ${intent.channel} has no cancel`, { bare });
    default:
      return assertNever(action);
  }
}
