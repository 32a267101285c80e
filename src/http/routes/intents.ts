import type { App } from '../typed-app.js';
import { tagIntent } from '../../adapters/tracing.js';
import Type from 'typebox';
import { CHANNEL_BEHAVIOUR } from '../../domain/channels/channels.js';
import { type IntentDeps, createIntent } from '../../domain/intents/create/create-intent.js';
import { IntentBody, intentRequest, QuoteBody, withBodyDefaults } from '../../domain/intents/create/intent-request.js';
import { findOwnIntent, type Intent, listEvents } from '../../domain/intents/store/intent-store.js';
import { refundedAmountOf } from '../../domain/refunds/refund-store.js';
import { calculateFees } from '../../domain/intents/create/fee-calculation.js';
import { callerKey, requireUserId } from '../plugins/auth.js';
import { addRequestLogFields } from '../log-options.js';
import { type RouteError, responses, Uuid } from '../schemas/shared.js';
import { IntentCreated, IntentEvents, IntentView, Quote } from '../schemas/intents.js';

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

/** What creating an intent can answer beyond authentication and validation (docs/design.md, Order of checks on POST /intents). */
const CREATE_INTENT_ERRORS: readonly RouteError[] = [
  'BAD_REQUEST',
  'NO_ROUTE',
  'FORBIDDEN',
  'CONFLICT',
  'TRANSACTION_IN_PROGRESS',
  'ACCOUNT_NOT_FOUND',
  'INSUFFICIENT_FUNDS',
  'LIMIT_EXCEEDED',
  'PSPX_NOT_REGISTERED',
  'PSPX_METADATA_INVALID',
  'EVAL_ERROR',
  'LEDGER_TRANSFER_ERROR',
  'SERVICE_UNAVAILABLE',
];

export function intentRoutes(app: App, deps: IntentDeps) {
  app.post(
    '/intents',
    {
      config: { userIdHeader: 'required' },
      schema: {
        tags: ['intents'],
        operationId: 'createIntent',
        summary: 'Create a payment intent (201), or replay one by its idempotency key (200)',
        body: IntentBody,
        response: responses({ 200: IntentCreated, 201: IntentCreated }, CREATE_INTENT_ERRORS),
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
      // From here on the request's own log lines carry the intent id, and its access line says what
      // became of the payment: the one line a payment writes at info (docs/OPERATIONS.md, Logs).
      const { intent } = answer;
      addRequestLogFields(request, reply, {
        traceId: intent.id,
        intent: { status: intent.status, channel: intent.channel, operationType: intent.operationType, amount: intent.amount.toString() },
      });
      tagIntent(intent.id);
      reply.status(answer.replayed ? 200 : 201);
      return createdView(intent, answer.replayed);
    },
  );

  app.post(
    '/intents/quote',
    {
      config: { validationDetails: true },
      schema: {
        tags: ['intents'],
        operationId: 'quoteIntent',
        summary: 'Fee preview: no write',
        body: QuoteBody,
        response: responses({ 200: Quote }, ['ACCOUNT_NOT_FOUND', 'EVAL_ERROR', 'SERVICE_UNAVAILABLE']),
      },
    },
    async (request) => {
      const quote = withBodyDefaults(request.body);
      const amount = BigInt(quote.amount);
      const fees = await calculateFees(deps.db, deps.fees, request.caller.serviceId, { ...quote, amount });
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
        operationId: 'getIntent',
        summary: 'Read an intent of the calling service',
        params: IdParams,
        response: responses({ 200: IntentView }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const intent = await findOwnIntent(deps.db, request.caller.serviceId, request.params.id);
      return { ...intentView(intent), refundedAmount: (await refundedAmountOf(deps.db, intent.id)).toString() };
    },
  );

  app.get(
    '/intents/:id/events',
    {
      schema: {
        tags: ['intents'],
        operationId: 'listIntentEvents',
        summary: 'Audit trail of an intent, oldest first',
        params: IdParams,
        response: responses({ 200: IntentEvents }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const intent = await findOwnIntent(deps.db, request.caller.serviceId, request.params.id);
      return { events: await listEvents(deps.db, intent.id) };
    },
  );
}
