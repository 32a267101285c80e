import type { Database } from '../../../adapters/database.js';
import { recordChange } from '../../admin/change-log.js';
import { apiError } from '../../errors.js';
import type { Logger } from '../../../adapters/logger.js';
import type { IntentStatus } from '../../model.js';
import { lockIntent } from './deferred-money.js';
import { moveIntent } from '../store/intent-writer.js';
import { enqueueJob, type OutboxKind, openJobKinds } from '../store/outbox-jobs.js';
import type { StatusPublisher } from '../store/status-publisher.js';

export const RESOLUTIONS = ['CONFIRMED', 'FAILED'] as const;
export type Resolution = (typeof RESOLUTIONS)[number];

/** failureReason of an intent an operator failed without giving a reason. */
export const RESOLVED_FAILED_REASON = 'manual_review_failed';

export interface ResolveInput {
  readonly intentId: string;
  readonly resolution: Resolution;
  readonly reason: string | undefined;
  /** Who resolved: the signing service id, or 'admin-token'. */
  readonly actor: string;
  readonly log: Logger;
}

/**
 * The 200 body. `status` is the status after the call: a CONFIRMED resolution leaves the intent
 * in MANUAL_REVIEW until the outbox has posted it (then SETTLED), and `queuedJob` names the job
 * that will finish it; null when the call changed nothing.
 */
export interface ResolveAnswer {
  readonly intentId: string;
  readonly previousStatus: IntentStatus;
  readonly status: IntentStatus;
  readonly resolution: Resolution;
  readonly queuedJob: OutboxKind | null;
}

export interface ResolveDeps {
  readonly db: Database;
  readonly publisher: StatusPublisher;
}

/**
 * POST /admin/intents/{id}/resolve (docs/rules.md R5, R35): only MANUAL_REVIEW is resolvable
 * (422 WRONG_STATUS otherwise), SETTLED and FAILED answer 200 without a side effect, and any
 * service's intent may be resolved. The intent row is locked and the status change is a guarded
 * update (docs/rules.md R26), so two operators resolving at once produce one decision; the other sees its
 * outcome.
 */
export async function resolveIntent(deps: ResolveDeps, input: ResolveInput): Promise<ResolveAnswer> {
  const outcome = await deps.db.transaction(async (tx): Promise<{ answer: ResolveAnswer; changed: boolean; publishAt: Date | null }> => {
    const intent = await lockIntent(tx, input.intentId);
    if (intent === null) throw apiError('NOT_FOUND', 'intent not found');
    const unchanged = {
      intentId: intent.id,
      previousStatus: intent.status,
      status: intent.status,
      resolution: input.resolution,
      queuedJob: null,
    };
    if (intent.status === 'SETTLED' || intent.status === 'FAILED') return { answer: unchanged, changed: false, publishAt: null };
    if (intent.status !== 'MANUAL_REVIEW') throw apiError('WRONG_STATUS', `intent is ${intent.status}, only MANUAL_REVIEW can be resolved`);

    const open = await openJobKinds(tx, intent.id);
    // A CONFIRMED resolution waits in the outbox: the same call again is a replay, the opposite one is too late.
    if (open.includes('post_pending')) {
      if (input.resolution === 'FAILED') throw apiError('CONFLICT', 'intent was already resolved CONFIRMED; its settlement is queued');
      return { answer: { ...unchanged, queuedJob: 'post_pending' as const }, changed: false, publishAt: null };
    }
    const change = {
      actor: input.actor,
      entity: 'intent',
      entityId: intent.id,
      action: 'update' as const,
      before: { status: intent.status },
    };
    if (input.resolution === 'CONFIRMED') {
      await enqueueJob(tx, intent.id, 'post_pending', {
        resolvedBy: input.actor,
        ...(input.reason === undefined ? {} : { reason: input.reason }),
      });
      await recordChange(tx, { ...change, after: { status: intent.status, resolution: 'CONFIRMED', queuedJob: 'post_pending' } });
      return { answer: { ...unchanged, queuedJob: 'post_pending' as const }, changed: true, publishAt: null };
    }
    const reason = input.reason ?? RESOLVED_FAILED_REASON;
    const failed = await moveIntent(tx, intent.id, {
      from: 'MANUAL_REVIEW',
      to: 'FAILED',
      reason,
      payload: { resolution: 'FAILED', resolvedBy: input.actor },
      changes: { failureReason: reason, endSubState: true },
      job: { kind: 'void_pending', payload: { reason, resolvedBy: input.actor } },
    });
    if (failed === null) throw new Error(`intent ${intent.id} left MANUAL_REVIEW under a locked row`);
    await recordChange(tx, {
      ...change,
      after: { status: 'FAILED', resolution: 'FAILED', failureReason: reason, queuedJob: 'void_pending' },
    });
    const publishAt = intent.live ? failed.updatedAt : null;
    return { answer: { ...unchanged, status: 'FAILED' as const, queuedJob: 'void_pending' as const }, changed: true, publishAt };
  });
  const { answer, changed, publishAt } = outcome;
  if (changed) {
    input.log
      .child({ traceId: input.intentId })
      .info(
        { event: 'intent_resolved', resolution: input.resolution, actor: input.actor, queuedJob: answer.queuedJob },
        'manual review resolved',
      );
  }
  if (publishAt !== null) void deps.publisher.publish(input.intentId, [answer.status], publishAt);
  return answer;
}
