import Type from 'typebox';
import type { App } from '../../typed-app.js';
import type { Database } from '../../../adapters/database.js';
import { ServiceId } from '../../../domain/wire-types.js';
import { DEAD_PAGE_DEFAULT, listDeadDeliveries, redeliverDead } from '../../../domain/events/webhooks/dead-deliveries.js';
import { NullableTimestamp, responses, Timestamp, Uuid } from '../../schemas/shared.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import { LIST_PAGE_MAX } from '../../schemas/admin.js';

/** The feed's cursors are opaque but short and URL-safe; 100 is also the router's limit on a path parameter. */
const FeedCursor = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9._~=-]+$', description: 'the event cursor' });

const DeadQuery = Type.Object(
  {
    serviceId: Type.Optional(ServiceId),
    limit: Type.Integer({ minimum: 1, maximum: LIST_PAGE_MAX, default: DEAD_PAGE_DEFAULT }),
    offset: Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 0 }),
  },
  { additionalProperties: false },
);

export const DeadWebhook = Type.Object({
  cursor: Type.String(),
  serviceId: Type.String(),
  intentId: Uuid,
  attempts: Type.Integer(),
  firstAttemptAt: NullableTimestamp,
  lastAttemptAt: NullableTimestamp,
  deadAt: Timestamp,
  lastOutcome: Type.Union([Type.String(), Type.Null()]),
  lastHttpStatus: Type.Union([Type.Integer(), Type.Null()]),
  heldBack: Type.Integer({ description: 'later events of the same intent waiting behind this one' }),
  event: Type.Unknown({ description: 'the event as POSTed (GET /events shape)' }),
});

export const Redelivery = Type.Object({ cursor: Type.String(), serviceId: Type.String(), intentId: Uuid });

const config = { auth: 'admin' as const };
const tags = ['admin'];

/** GET /admin/webhooks/dead and POST /admin/webhooks/dead/{cursor}/redeliver (docs/OPERATIONS.md, Webhooks). */
export function adminWebhookRoutes(app: App, db: Database): void {
  app.get(
    '/admin/webhooks/dead',
    {
      config,
      schema: {
        tags,
        security: ADMIN_SECURITY,
        operationId: 'listDeadWebhooks',
        summary: 'Webhook deliveries that are dead after the retry window, oldest first',
        querystring: DeadQuery,
        response: responses({ 200: Type.Object({ deadWebhooks: Type.Array(DeadWebhook) }) }, []),
      },
    },
    async (request) => ({ deadWebhooks: await listDeadDeliveries(db, request.query) }),
  );
  app.post(
    '/admin/webhooks/dead/:cursor/redeliver',
    {
      config,
      schema: {
        tags,
        security: ADMIN_SECURITY,
        operationId: 'redeliverDeadWebhook',
        summary: 'Attempt a dead webhook again now, with a fresh retry window; the later events of its intent follow it',
        params: Type.Object({ cursor: FeedCursor }),
        response: responses({ 202: Redelivery }, ['NOT_FOUND', 'CONFLICT']),
      },
    },
    async (request, reply) => {
      const redelivery = await redeliverDead(db, request.params.cursor, request.caller.serviceId);
      request.log.info({ event: 'webhook_redelivery', ...redelivery }, 'dead webhook scheduled for redelivery');
      return reply.code(202).send(redelivery);
    },
  );
}
