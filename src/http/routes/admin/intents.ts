import type { App } from '../../typed-app.js';
import Type from 'typebox';
import type { Database } from '../../../adapters/database.js';
import { apiError } from '../../../domain/errors.js';
import {
  decodeCursor,
  type IntentFilter,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  listIntents,
} from '../../../domain/intents/store/intent-listing.js';
import { findIntent, type Intent, listEvents } from '../../../domain/intents/store/intent-store.js';
import { CHANNELS, INTENT_STATUSES, OPERATION_TYPES } from '../../../domain/model.js';
import { ServiceId } from '../../../domain/wire-types.js';
import { responses, Uuid } from '../../schemas/shared.js';
import { intentView } from '../intents.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import { AdminIntentPage, AdminIntentWithEvents, AdminRefunds } from '../../schemas/admin.js';
import { listRefunds, refundView } from '../../../domain/refunds/refund-store.js';

const config = { auth: 'admin' as const };
const tags = ['admin'];

const ListQuery = Type.Object(
  {
    status: Type.Optional(Type.Enum(INTENT_STATUSES)),
    operationType: Type.Optional(Type.Enum(OPERATION_TYPES)),
    channel: Type.Optional(Type.Enum(CHANNELS)),
    serviceId: Type.Optional(ServiceId),
    createdFrom: Type.Optional(Type.String({ format: 'date-time', description: 'inclusive, ISO 8601' })),
    createdTo: Type.Optional(Type.String({ format: 'date-time', description: 'exclusive, ISO 8601' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'nextCursor of the previous page' })),
    limit: Type.Integer({ minimum: 1, maximum: LIST_LIMIT_MAX, default: LIST_LIMIT_DEFAULT }),
  },
  { additionalProperties: false },
);

const iso = (date: Date | null) => (date === null ? null : date.toISOString());

/** The intent as its own service reads it, with what only an operator sees. */
function adminIntentView(intent: Intent) {
  return {
    ...intentView(intent),
    serviceId: intent.serviceId,
    idempotencyKey: intent.idempotencyKey,
    userId: intent.userId,
    pspState: intent.pspState,
    externalRef: intent.externalRef,
    cancelReason: intent.cancelReason,
    settlementDate: intent.settlementDate,
    metadata: { ...intent.metadata },
    expiresAt: iso(intent.expiresAt),
  };
}

type ListQueryValue = {
  status?: IntentFilter['status'];
  operationType?: IntentFilter['operationType'];
  channel?: IntentFilter['channel'];
  serviceId?: string;
  createdFrom?: string;
  createdTo?: string;
  cursor?: string;
  limit: number;
};

function filterOf(query: ListQueryValue): IntentFilter {
  return {
    ...(query.status === undefined ? {} : { status: query.status }),
    ...(query.operationType === undefined ? {} : { operationType: query.operationType }),
    ...(query.channel === undefined ? {} : { channel: query.channel }),
    ...(query.serviceId === undefined ? {} : { serviceId: query.serviceId }),
    ...(query.createdFrom === undefined ? {} : { createdFrom: query.createdFrom }),
    ...(query.createdTo === undefined ? {} : { createdTo: query.createdTo }),
  };
}

/** Operator reads across every service (admin authentication, docs/rules.md R11); tenant isolation applies to service keys only. */
export function adminIntentRoutes(app: App, deps: { readonly db: Database }): void {
  app.get(
    '/admin/intents',
    {
      config,
      schema: {
        tags,
        security: ADMIN_SECURITY,
        operationId: 'listAdminIntents',
        summary: 'List intents of every service, newest first, with filters and cursor paging',
        querystring: ListQuery,
        response: responses({ 200: AdminIntentPage }, ['VALIDATION_ERROR']),
      },
    },
    async (request) => {
      const query = request.query;
      if (query.cursor !== undefined && decodeCursor(query.cursor) === null)
        throw apiError('VALIDATION_ERROR', 'querystring.cursor: not a cursor this listing issued');
      const page = await listIntents(deps.db, filterOf(query), { limit: query.limit, cursor: query.cursor ?? null });
      return { intents: page.intents.map(adminIntentView), nextCursor: page.nextCursor };
    },
  );

  app.get(
    '/admin/intents/:id',
    {
      config,
      schema: {
        tags,
        security: ADMIN_SECURITY,
        operationId: 'getAdminIntent',
        summary: 'Read any intent with its audit trail',
        params: Type.Object({ id: Uuid }),
        response: responses({ 200: AdminIntentWithEvents }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const intent = await findIntent(deps.db, request.params.id);
      if (intent === null) throw apiError('NOT_FOUND', 'intent not found');
      return { ...adminIntentView(intent), events: await listEvents(deps.db, intent.id) };
    },
  );

  app.get(
    '/admin/intents/:id/refunds',
    {
      config,
      schema: {
        tags,
        security: ADMIN_SECURITY,
        operationId: 'listAdminIntentRefunds',
        summary: "Any intent's refunds, oldest first, with the sum of the settled ones",
        params: Type.Object({ id: Uuid }),
        response: responses({ 200: AdminRefunds }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const intent = await findIntent(deps.db, request.params.id);
      if (intent === null) throw apiError('NOT_FOUND', 'intent not found');
      const refunds = await listRefunds(deps.db, intent.id);
      // Summed from the same read as the list, so the two always agree (GET /intents/{id} sums the same SETTLED rows).
      const refundedAmount = refunds.filter((refund) => refund.status === 'SETTLED').reduce((sum, refund) => sum + refund.amount, 0n);
      return { refundedAmount: refundedAmount.toString(), refunds: refunds.map(refundView) };
    },
  );
}
