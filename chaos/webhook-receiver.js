// The chaos run's webhook receiver: one node:http server for every service, the service named by
// the path (/hooks/{serviceId}) so that each request is checked with that service's own secret.
// It refuses a share of valid requests on purpose (503), so that retries happen all through the
// run, and keeps each service's acknowledged events once per Idempotency-Key.

import { createServer } from 'node:http';
import { verifyWebhook } from '@payorch/client';

/** @typedef {import('@payorch/client').WebhookEvent} WebhookEvent */

/**
 * @param {(serviceId: string) => string | undefined} secretOf
 * @param {number} refusedShare of valid requests answered 503, from 0 to 1
 */
export async function startWebhookReceiver(secretOf, refusedShare) {
  const figures = { requests: 0, invalid: 0, refusedOnPurpose: 0, repeats: 0 };
  /** @type {Map<string, WebhookEvent[]>} intent id → acknowledged events, in arrival order */
  const byIntent = new Map();
  const seen = new Set();
  /** @type {Map<string, string>} refund id → the status its event carried */
  const refunds = new Map();
  const server = createServer((request, response) => {
    /** @type {Buffer[]} */
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', async () => {
      figures.requests += 1;
      const serviceId = /^\/hooks\/([A-Za-z0-9._-]+)$/.exec(request.url ?? '')?.[1] ?? '';
      const secret = secretOf(serviceId);
      const verified =
        secret === undefined
          ? { valid: /** @type {const} */ (false), reason: 'unknown service' }
          : await verifyWebhook(
              { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks) },
              secret,
            );
      if (!verified.valid) {
        figures.invalid += 1;
        response.writeHead(401).end();
        return;
      }
      if (Math.random() < refusedShare) {
        figures.refusedOnPurpose += 1;
        response.writeHead(503).end();
        return;
      }
      if (seen.has(verified.idempotencyKey)) figures.repeats += 1;
      else {
        seen.add(verified.idempotencyKey);
        // A refund's event names its original's intentId but is no status change of it (docs/EVENTS.md): kept apart.
        const refundId = refundIdOf(verified.event);
        if (refundId !== null) refunds.set(refundId, verified.event.statusTo);
        else {
          const events = byIntent.get(verified.event.intentId) ?? [];
          events.push(verified.event);
          byIntent.set(verified.event.intentId, events);
        }
      }
      response.writeHead(204).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('webhook receiver has no port');
  return {
    figures,
    /** @param {string} serviceId */
    urlFor: (serviceId) => `http://127.0.0.1:${address.port}/hooks/${serviceId}`,
    /**
     * Whether the intent's webhooks ended in `status`, and whether they came in order (each
     * change starting from the status the one before it ended in).
     * @param {string} intentId
     * @param {string} status
     */
    check(intentId, status) {
      const events = byIntent.get(intentId) ?? [];
      const inOrder = events.every((event, i) => i === 0 || event.statusFrom === events[i - 1]?.statusTo);
      return { received: events.some((event) => event.statusTo === status), inOrder };
    },
    /**
     * Whether the refund's event arrived with `status`.
     * @param {string} refundId
     * @param {string} status
     */
    refundReceived: (refundId, status) => refunds.get(refundId) === status,
    close: () => new Promise((resolve) => server.close(() => resolve(undefined))),
  };
}

/**
 * The refund an event is about, when it is one: the webhook body carries `type` and `refundId`
 * beside the fields the client's WebhookEvent type names.
 * @param {WebhookEvent} event
 * @returns {string | null}
 */
function refundIdOf(event) {
  const fields = /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (event));
  return fields.type === 'refund' && typeof fields.refundId === 'string' ? fields.refundId : null;
}
