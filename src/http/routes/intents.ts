import type { App } from '../typed-app.js';
import { tagIntent } from '../../adapters/tracing.js';
import Type from 'typebox';
import { CHANNEL_BEHAVIOUR } from '../../domain/channels.js';
import { type IntentDeps, createIntent } from '../../domain/intents/create/create-intent.js';
import { IntentBody, intentRequest, QuoteBody, withBodyDefaults } from '../../domain/intents/create/intent-request.js';
import { findOwnIntent, type Intent, listEvents } from '../../domain/intents/store/intent-store.js';
import { calculateFees } from '../../domain/intents/create/fee-calculation.js';
import { callerKey, requireUserId } from '../plugins/auth.js';
import { Money, responses, Uuid } from '../schemas.js';

const Status = Type.String({ description: 'one of the 9 intent statuses' });

const IntentCreated = Type.Object({
  intentId: Uuid,
  status: Status,
  channel: Type.String(),
  amount: Type.Optional(Money),
  currency: Type.Optional(Type.String()),
  preFeeAmount: Money,
  postFeeAmount: Money,
  requiresMonitoring: Type.Boolean(),
  createdAt: Type.String(),
  expiresAt: Type.Optional(Type.String()),
  qrSignature: Type.Optional(Type.String()),
  version: Type.Integer(),
});

const IntentView = Type.Object({
  intentId: Uuid,
  status: Status,
  operationType: Type.String(),
  channel: Type.String(),
  amount: Money,
  currency: Type.String(),
  preFeeAmount: Money,
  postFeeAmount: Money,
  fromAccount: Type.Union([Type.String(), Type.Null()]),
  toAccount: Type.String(),
  failureReason: Type.Union([Type.String(), Type.Null()]),
  version: Type.Integer(),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

const IntentEventView = Type.Object({
  id: Type.Integer(),
  statusFrom: Type.Union([Type.String(), Type.Null()]),
  statusTo: Type.String(),
  reason: Type.Union([Type.String(), Type.Null()]),
  payload: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
  createdAt: Type.String(),
});

const IdParams = Type.Object({ id: Uuid });

export function createdView(intent: Intent, replayed: boolean) {
  return {
    intentId: intent.id,
    status: intent.status,
    channel: intent.channel,
    ...(replayed ? { amount: intent.amount.toString(), currency: intent.currency } : {}),
    preFeeAmount: intent.preFeeAmount.toString(),
    postFeeAmount: intent.postFeeAmount.toString(),
    // Reserved and waiting for the channel's worker (PSPX): the caller should watch for the outcome.
    requiresMonitoring: intent.status === 'AUTHORIZED' && CHANNEL_BEHAVIOUR[intent.channel].createdAs === 'AUTHORIZED',
    createdAt: intent.createdAt.toISOString(),
    ...(intent.expiresAt === null ? {} : { expiresAt: intent.expiresAt.toISOString() }),
    ...(intent.qrSignature === null ? {} : { qrSignature: Buffer.from(intent.qrSignature).toString('base64url') }),
    version: intent.version,
  };
}

export function intentView(intent: Intent) {
  return {
    intentId: intent.id,
    status: intent.status,
    operationType: intent.operationType,
    channel: intent.channel,
    amount: intent.amount.toString(),
    currency: intent.currency,
    preFeeAmount: intent.preFeeAmount.toString(),
    postFeeAmount: intent.postFeeAmount.toString(),
    fromAccount: intent.fromAccountName,
    toAccount: intent.toAccountName,
    failureReason: intent.failureReason,
    version: intent.version,
    createdAt: intent.createdAt.toISOString(),
    updatedAt: intent.updatedAt.toISOString(),
  };
}

export function intentRoutes(app: App, deps: IntentDeps) {
  app.post(
    '/intents',
    {
      schema: {
        tags: ['intents'],
        summary: 'Create a payment intent (201), or replay one by its idempotency key (200)',
        body: IntentBody,
        response: responses({ 200: IntentCreated, 201: IntentCreated }, [400, 401, 403, 409, 422, 500]),
      },
    },
    async (request, reply) => {
      const key = callerKey(request);
      const actor = requireUserId(request, 'BAD_REQUEST');
      const answer = await createIntent(deps, {
        serviceId: key.serviceId,
        permissions: key.permissions,
        actor,
        request: intentRequest(request.body),
        log: request.log,
        config: request.configSnapshot,
      });
      // From here on the request's own log lines (the response line too) carry the intent id.
      request.log = request.log.child({ traceId: answer.intent.id });
      tagIntent(answer.intent.id);
      reply.log = request.log;
      reply.status(answer.replayed ? 200 : 201);
      return createdView(answer.intent, answer.replayed);
    },
  );

  app.post(
    '/intents/quote',
    {
      config: { validationDetails: true },
      schema: {
        tags: ['intents'],
        summary: 'Fee preview: no write',
        body: QuoteBody,
        response: responses(
          {
            200: Type.Object({
              fee: Money,
              totalCharge: Money,
              breakdown: Type.Array(Type.Object({ account: Type.String(), amount: Money })),
            }),
          },
          [401, 422],
        ),
      },
    },
    async (request) => {
      const quote = withBodyDefaults(request.body);
      const amount = BigInt(quote.amount);
      const fees = await calculateFees(deps.db, deps.fees, { ...quote, amount });
      return {
        fee: fees.preFee.toString(),
        totalCharge: (amount + fees.preFee).toString(),
        breakdown: fees.preSplits.map((split) => ({ account: split.account, amount: split.amount.toString() })),
      };
    },
  );

  app.get(
    '/intents/:id',
    {
      schema: {
        tags: ['intents'],
        summary: 'Read an intent of the calling service',
        params: IdParams,
        response: responses({ 200: IntentView }, [401, 404]),
      },
    },
    async (request) => intentView(await findOwnIntent(deps.db, request.caller.serviceId, request.params.id)),
  );

  app.get(
    '/intents/:id/events',
    {
      schema: {
        tags: ['intents'],
        summary: 'Audit trail of an intent, oldest first',
        params: IdParams,
        response: responses({ 200: Type.Object({ events: Type.Array(IntentEventView) }) }, [401, 404]),
      },
    },
    async (request) => {
      const intent = await findOwnIntent(deps.db, request.caller.serviceId, request.params.id);
      return { events: await listEvents(deps.db, intent.id) };
    },
  );
}
