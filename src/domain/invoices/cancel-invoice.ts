import type { Database } from '../../adapters/database.js';
import { apiError } from '../errors.js';
import type { Logger } from '../../adapters/logger.js';
import { ownInvoice } from './invoice-access.js';
import { findIntent, type Intent } from '../intents/store/intent-store.js';
import { moveIntent } from '../intents/store/intent-writer.js';
import type { StatusPublisher } from '../intents/store/status-publisher.js';

export const DEFAULT_CANCEL_REASON = 'merchant_canceled';

export interface CancelInvoiceInput {
  readonly serviceId: string;
  readonly intentId: string;
  /** X-User-Id: the issuer, or 0 (the admin bypass). */
  readonly actor: number;
  readonly reason: string;
  readonly log: Logger;
}

/**
 * POST /intents/{id}/cancel. An unconfirmed invoice holds no money, so a cancel is a status
 * change and its audit row, nothing more. Not idempotent: a second cancel is 409 CANNOT_CANCEL.
 */
export async function cancelInvoice(
  deps: { readonly db: Database; readonly publisher: StatusPublisher },
  input: CancelInvoiceInput,
): Promise<Intent> {
  const invoice = ownInvoice(await findIntent(deps.db, input.intentId), input.serviceId, input.intentId, 'cancel');
  if (input.actor !== 0 && input.actor !== invoice.issuedByUserId) {
    throw apiError('UNAUTHORIZED_ACTOR', `user ${input.actor} did not issue invoice ${invoice.id}`, { bare: true });
  }
  const canceled = await deps.db.transaction((tx) =>
    // docs/rules.md R26: status is the guard; confirm and the expiry sweep race on the same row and condition.
    moveIntent(tx, invoice.id, {
      from: 'CREATED',
      to: 'CANCELED',
      reason: input.reason,
      payload: { actor: input.actor },
      changes: { cancelReason: input.reason },
    }),
  );
  if (canceled === null) {
    const current = (await findIntent(deps.db, invoice.id)) ?? invoice;
    throw apiError('CANNOT_CANCEL', `invoice is ${current.status}`, { bare: true, extra: { status: current.status } });
  }
  if (canceled.live) void deps.publisher.publish(canceled.id, ['CANCELED'], canceled.updatedAt);
  input.log.child({ traceId: canceled.id }).info({ reason: input.reason, actor: input.actor }, 'invoice canceled');
  return canceled;
}
