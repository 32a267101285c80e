import type { App } from '../../typed-app.js';
import Type from 'typebox';
import { INTENT_STATUSES } from '../../../domain/model.js';
import { RESOLUTIONS, type ResolveDeps, resolveIntent } from '../../../domain/intents/money/resolve-intent.js';
import { OUTBOX_KINDS } from '../../../domain/intents/store/outbox-jobs.js';
import { responses, Uuid } from '../../schemas.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';

export const ResolveBody = Type.Object(
  {
    resolution: Type.Enum(RESOLUTIONS),
    /** With FAILED: the intent's failureReason; with CONFIRMED: recorded in the audit row. */
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
  },
  { additionalProperties: false },
);

export const ResolveResponse = Type.Object({
  intentId: Uuid,
  previousStatus: Type.Enum(INTENT_STATUSES),
  status: Type.Enum(INTENT_STATUSES, {
    description: 'after the call; CONFIRMED stays MANUAL_REVIEW until the queued post_pending job settles it',
  }),
  resolution: Type.Enum(RESOLUTIONS),
  queuedJob: Type.Union([Type.Enum(OUTBOX_KINDS), Type.Null()], {
    description: 'the outbox job that finishes the resolution; null when nothing changed',
  }),
});

/**
 * POST /admin/intents/{id}/resolve: an operator's decision on a payout in MANUAL_REVIEW. Auth
 * mode `resolve`: a signed key with forceResolve or admin, or the admin bearer token (docs/rules.md R11).
 */
export function adminResolveRoutes(app: App, deps: ResolveDeps): void {
  app.post(
    '/admin/intents/:id/resolve',
    {
      config: { auth: 'resolve' as const },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        operationId: 'resolveIntent',
        summary:
          'Resolve an intent in MANUAL_REVIEW: CONFIRMED queues its settlement, FAILED fails it and queues the release of its reservation',
        params: Type.Object({ id: Uuid }),
        body: ResolveBody,
        response: responses({ 200: ResolveResponse }, ['NOT_FOUND', 'CONFLICT', 'WRONG_STATUS']),
      },
    },
    async (request) => {
      const { id } = request.params;
      const body = request.body;
      return resolveIntent(deps, {
        intentId: id,
        resolution: body.resolution,
        reason: body.reason,
        actor: request.caller.serviceId,
        log: request.log,
      });
    },
  );
}
