import type { IncomingHttpHeaders } from 'node:http';
import { verifyWebhookSignature } from '../http/plugins/message-signature.js';

/**
 * A webhook request as a receiver has it: Node's IncomingMessage with the body read, or a fetch
 * Request's parts. `url` is the request target (`/hooks?x=1`) or the full URL.
 */
export interface WebhookRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders | Headers | Readonly<Record<string, string | string[] | undefined>>;
  /** The body exactly as received: the digest is over these bytes, not over a re-serialized object. */
  readonly body: string | Uint8Array;
}

/** One status change of one of the service's intents: the object GET /events lists. */
export interface WebhookEvent {
  readonly cursor: string;
  readonly intentId: string;
  readonly operationType: string;
  readonly statusFrom: string | null;
  readonly statusTo: string;
  readonly amount: string;
  readonly currency: string;
  readonly occurredAt: string;
}

export type VerifiedWebhook =
  | {
      readonly valid: true;
      readonly event: WebhookEvent;
      /** The event's cursor: the same on every attempt, so store it and drop a repeat. */
      readonly idempotencyKey: string;
    }
  | { readonly valid: false; readonly reason: string };

const headersOf = (headers: WebhookRequest['headers']): IncomingHttpHeaders =>
  headers instanceof Headers ? Object.fromEntries([...headers].map(([name, value]) => [name, value])) : headers;

const targetOf = (url: string): string => {
  if (!/^https?:\/\//i.test(url)) return url;
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
};

/**
 * Checks that a webhook came from payorch for this service (docs/OPERATIONS.md, Webhooks): the
 * RFC 9421 signature with keyid "payorch" under the service's `secret`, covering the method, the
 * path and the Content-Digest, created within ±60 s of `nowS`; the digest matching the body. Answer
 * anything but 2xx to an invalid one, and 2xx to a valid one once it is stored.
 */
export function verifyWebhook(request: WebhookRequest, secret: string, nowS = Math.floor(Date.now() / 1000)): VerifiedWebhook {
  const rawBody = Buffer.from(request.body);
  try {
    verifyWebhookSignature(
      { method: request.method.toUpperCase(), url: targetOf(request.url), headers: headersOf(request.headers), rawBody },
      secret,
      nowS,
    );
  } catch (error) {
    return { valid: false, reason: error instanceof Error ? error.message : String(error) };
  }
  const event = JSON.parse(rawBody.toString('utf8')) as WebhookEvent;
  return { valid: true, event, idempotencyKey: event.cursor };
}
