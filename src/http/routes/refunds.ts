import Type from 'typebox';
import type { App } from '../typed-app.js';
import { callerKey, requireUserId } from '../plugins/auth.js';
import { createRefund, type RefundDeps } from '../../domain/refunds/create-refund.js';
import { RefundBody, refundRequest } from '../../domain/refunds/refund-request.js';
import { findOwnRefund, listRefunds, RefundList, RefundView, refundView } from '../../domain/refunds/refund-store.js';
import { findOwnIntent } from '../../domain/intents/store/intent-store.js';
import { responses, Uuid } from '../schemas/shared.js';

const IdParams = Type.Object({ id: Uuid });
const RefundIdParams = Type.Object({ refundId: Uuid });

/** Refunds of settled intents (docs/rules.md R57). */
export function refundRoutes(app: App, deps: RefundDeps) {
  app.post(
    '/intents/:id/refunds',
    {
      config: { userIdHeader: 'required' },
      schema: {
        tags: ['refunds'],
        operationId: 'createRefund',
        summary: 'Refund a settled intent, in part or in full (201), or replay a refund by its idempotency key (200)',
        params: IdParams,
        body: RefundBody,
        response: responses({ 200: RefundView, 201: RefundView }, [
          'BAD_REQUEST',
          'FORBIDDEN',
          'NOT_FOUND',
          'CONFLICT',
          'REFUND_EXCEEDS_REMAINING',
          'NOT_REFUNDABLE',
          'INSUFFICIENT_FUNDS',
          'LEDGER_TRANSFER_ERROR',
          'SERVICE_UNAVAILABLE',
        ]),
      },
    },
    async (request, reply) => {
      const key = callerKey(request);
      const actor = requireUserId(request, 'BAD_REQUEST');
      const answer = await createRefund(deps, {
        serviceId: key.serviceId,
        permissions: key.permissions,
        actor,
        intentId: request.params.id,
        request: refundRequest(request.body),
      });
      reply.status(answer.replayed ? 200 : 201);
      return refundView(answer.refund);
    },
  );

  app.get(
    '/intents/:id/refunds',
    {
      schema: {
        tags: ['refunds'],
        operationId: 'listRefunds',
        summary: 'The refunds of an intent of the calling service, oldest first',
        params: IdParams,
        response: responses({ 200: RefundList }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const intent = await findOwnIntent(deps.db, request.caller.serviceId, request.params.id);
      return { refunds: (await listRefunds(deps.db, intent.id)).map(refundView) };
    },
  );

  app.get(
    '/refunds/:refundId',
    {
      schema: {
        tags: ['refunds'],
        operationId: 'getRefund',
        summary: 'Read a refund of the calling service',
        params: RefundIdParams,
        response: responses({ 200: RefundView }, ['NOT_FOUND']),
      },
    },
    async (request) => refundView(await findOwnRefund(deps.db, request.caller.serviceId, request.params.refundId)),
  );
}
