import type { FastifyRequest } from 'fastify';
import type { App } from '../typed-app.js';
import Type from 'typebox';
import { ApiError } from '../../domain/errors.js';
import { cancelInvoice, DEFAULT_CANCEL_REASON } from '../../domain/invoices/cancel-invoice.js';
import { confirmInvoice } from '../../domain/invoices/confirm-invoice.js';
import type { IntentDeps } from '../../domain/intents/create/create-intent.js';
import { requireUserId } from '../plugins/auth.js';
import { type RouteError, responses, Uuid } from '../schemas/shared.js';
import { CancelBody, CancelResult, ConfirmBody, ConfirmResult } from '../schemas/invoices.js';

/**
 * On confirm and cancel (docs/rules.md R29) a missing or malformed X-User-Id is 400 VALIDATION_ERROR, while the
 * catalogue's VALIDATION_ERROR is 422 everywhere else; the only such pairing, so it lives here.
 */
class HeaderValidationError extends ApiError {
  override readonly statusCode = 400;
  constructor(message: string) {
    super('VALIDATION_ERROR', message);
  }
}

function actorOf(request: FastifyRequest): number {
  try {
    return requireUserId(request, 'VALIDATION_ERROR');
  } catch (error) {
    if (error instanceof ApiError) throw new HeaderValidationError(error.message);
    throw error;
  }
}

/** If-Match carries the version as an integer; the quoted ETag form `"3"` is accepted too. */
function expectedVersionOf(request: FastifyRequest): number | null {
  const raw = request.headers['if-match'];
  if (raw === undefined) return null;
  const match = typeof raw === 'string' ? /^\s*(?:W\/)?"?(0|[1-9][0-9]{0,9})"?\s*$/.exec(raw) : null;
  if (match?.[1] === undefined || Number(match[1]) > 2 ** 31 - 1) throw new HeaderValidationError('If-Match must be an integer version');
  return Number(match[1]);
}

const IdParams = Type.Object({ id: Uuid });

/** The 400 a missing or malformed X-User-Id or If-Match gets here. */
const HEADER_VALIDATION_ERROR: RouteError = [400, 'VALIDATION_ERROR'];

/** Two-phase merchant invoices: the payer's confirm and the issuer's cancel. */
export function invoiceRoutes(app: App, deps: IntentDeps) {
  app.post(
    '/intents/:id/confirm',
    {
      config: { validationStatus: 400, userIdHeader: 'required' },
      schema: {
        tags: ['invoices'],
        operationId: 'confirmInvoice',
        summary: 'Pay a merchant invoice: SETTLED, or FAILED (200) when the payer lacks funds or a limit blocks',
        params: IdParams,
        body: ConfirmBody,
        response: responses({ 200: ConfirmResult }, [
          HEADER_VALIDATION_ERROR,
          'BAD_REQUEST',
          'CANCEL_NOT_SUPPORTED',
          'PAYER_ACCOUNT_USER_MISMATCH',
          'INTENT_NOT_FOUND',
          'PAYER_ACCOUNT_NOT_FOUND',
          'ALREADY_PROCESSED',
          'EXPIRED',
          'VERSION_MISMATCH',
          'TRANSACTION_IN_PROGRESS',
          'EVAL_ERROR',
          'LEDGER_TRANSFER_ERROR',
        ]),
      },
    },
    async (request) => {
      const actor = actorOf(request);
      const expectedVersion = expectedVersionOf(request);
      const { body } = request;
      const answer = await confirmInvoice(deps, {
        serviceId: request.caller.serviceId,
        intentId: request.params.id,
        actor,
        expectedVersion,
        payerLedgerAccountId: body.payerLedgerAccountId,
        payerUserId: body.payerUserId,
        idempotencyKey: body.idempotencyKey.toLowerCase(),
        log: request.log,
        config: request.configSnapshot,
      });
      const { intent } = answer;
      return {
        intentId: intent.id,
        status: intent.status,
        channel: intent.channel,
        createdAt: intent.createdAt.toISOString(),
        version: intent.version,
        replayed: answer.replayed,
      };
    },
  );

  app.post(
    '/intents/:id/cancel',
    {
      // The body is optional, but a schema would refuse a missing one; the route's own hook runs
      // after the signature check, which has already covered the empty raw body.
      preValidation: async (request) => {
        request.body ??= {};
      },
      config: { userIdHeader: 'required' },
      schema: {
        tags: ['invoices'],
        operationId: 'cancelInvoice',
        summary: 'Cancel an unconfirmed merchant invoice (the issuer, or X-User-Id 0)',
        params: IdParams,
        body: CancelBody,
        response: responses({ 200: CancelResult }, [
          HEADER_VALIDATION_ERROR,
          'BAD_REQUEST',
          'CANCEL_NOT_SUPPORTED',
          'UNAUTHORIZED_ACTOR',
          'INTENT_NOT_FOUND',
          'CANNOT_CANCEL',
        ]),
      },
    },
    async (request) => {
      const actor = actorOf(request);
      const body = request.body;
      const intent = await cancelInvoice(deps, {
        serviceId: request.caller.serviceId,
        intentId: request.params.id,
        actor,
        reason: body.reason ?? DEFAULT_CANCEL_REASON,
        log: request.log,
      });
      return {
        intentId: intent.id,
        status: 'CANCELED' as const,
        channel: intent.channel,
        preFeeAmount: '0',
        postFeeAmount: '0',
        requiresMonitoring: false,
        createdAt: intent.createdAt.toISOString(),
      };
    },
  );
}
