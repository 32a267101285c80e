import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../typed-app.js';
import Type from 'typebox';
import type { Metrics } from '../../observability/metrics.js';
import { apiError } from '../../domain/errors.js';
import { FINAL_STATUSES, type IntentStatus, OPERATION_TYPES } from '../../domain/model.js';
import { bearerMatches } from '../plugins/auth.js';
import { responses } from '../schemas/shared.js';

export interface MetricsRouteDeps {
  readonly metrics: Metrics;
  /** METRICS_TOKEN: when set, scrapes need `Authorization: Bearer <token>` (docs/rules.md R37). */
  readonly token: string | undefined;
}

/** Requests that matched no route share one label, so a scan of random URLs cannot grow the series. */
const UNMATCHED_ROUTE = 'unmatched';

/**
 * Registers the HTTP instrumentation and GET /metrics. Call it before the other routes: the hooks
 * then cover every route.
 */
export function metricsRoutes(app: App, deps: MetricsRouteDeps): void {
  const { metrics } = deps;
  app.addHook('onResponse', async (request, reply) => {
    metrics.observeRequest(
      { method: request.method, route: request.routeOptions.url ?? UNMATCHED_ROUTE, statusCode: reply.statusCode },
      reply.elapsedTime / 1000,
    );
  });
  app.addHook('preSerialization', async (request, reply, payload: unknown) => {
    observeIntentOutcome(metrics, request, reply, payload);
    return payload;
  });

  app.get(
    '/metrics',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['health'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics (text format 0.0.4)',
        description: 'No signature. When METRICS_TOKEN is configured: `Authorization: Bearer <METRICS_TOKEN>`, 401 otherwise.',
        security: [],
        response: responses(
          { 200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: Type.String() } } } },
          ['UNAUTHORIZED'],
        ),
      },
    },
    async (request, reply) => {
      if (deps.token !== undefined) {
        const authorization = request.headers.authorization;
        if (authorization === undefined || !bearerMatches(authorization, deps.token))
          throw apiError('UNAUTHORIZED', 'invalid metrics bearer token');
      }
      const text = await metrics.render();
      return reply.type(metrics.contentType).send(text);
    },
  );
}

const isFinal = (status: unknown): status is IntentStatus => FINAL_STATUSES.includes(status as IntentStatus);

interface OutcomePayload {
  readonly status?: unknown;
  readonly channel?: unknown;
  readonly replayed?: unknown;
  readonly error?: unknown;
}

/**
 * Counts intents at the HTTP boundary, from what the route answered, so the domain stays free of
 * metrics. Each route below is the only way its outcome is reached through the API; the workers
 * count their own (expiry, outbox, PSP) through WorkerMetrics.
 */
function observeIntentOutcome(metrics: Metrics, request: FastifyRequest, reply: FastifyReply, payload: unknown): void {
  if (request.method !== 'POST' || typeof payload !== 'object' || payload === null) return;
  const answer = payload as OutcomePayload;
  const channel = typeof answer.channel === 'string' ? answer.channel : null;
  switch (request.routeOptions.url) {
    case '/intents': {
      // A refused body may be unsigned or invalid: only the catalogue's names become label values,
      // so a caller cannot grow the series with made-up operation types.
      const body: unknown = request.body;
      const claimed = typeof body === 'object' && body !== null && 'operationType' in body ? body.operationType : undefined;
      const operationType = OPERATION_TYPES.find((type) => type === claimed) ?? 'unknown';
      if (reply.statusCode === 201 && channel !== null) {
        metrics.intentCreated(operationType, channel);
        if (isFinal(answer.status)) metrics.intentFinished(operationType, channel, answer.status);
      } else if (reply.statusCode >= 400 && reply.statusCode < 500 && typeof answer.error === 'string') {
        metrics.intentRefused(operationType, answer.error);
      }
      return;
    }
    case '/intents/:id/confirm':
      // Only invoices can be confirmed or canceled (docs/rules.md R30); a replayed confirm was counted the first time.
      if (reply.statusCode === 200 && answer.replayed === false && channel !== null && isFinal(answer.status)) {
        metrics.intentFinished('INVOICE_PAYMENT', channel, answer.status);
      }
      return;
    case '/intents/:id/refunds': {
      // docs/rules.md R57: a stored refund by its status (a FAILED one answers its refusal with its
      // refundId), a refused one by its error code, a replay (200) not again.
      const stored = reply.statusCode === 201 ? 'SETTLED' : 'refundId' in answer ? 'FAILED' : null;
      if (stored !== null) metrics.refundOutcome(stored);
      else if (reply.statusCode >= 400 && typeof answer.error === 'string') metrics.refundOutcome(answer.error);
      return;
    }
    case '/intents/:id/cancel':
      if (reply.statusCode === 200 && channel !== null) metrics.intentFinished('INVOICE_PAYMENT', channel, 'CANCELED');
      return;
    default:
      return;
  }
}
