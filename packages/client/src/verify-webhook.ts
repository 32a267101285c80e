import { contentDigestOf, SIGNATURE_LABEL, webhookSignatureInput } from './signing.js';

/**
 * A webhook request as a receiver has it: Node's IncomingMessage with its body read, or a fetch
 * Request's parts. `url` is the request target (`/hooks?x=1`) or the full URL.
 */
export interface WebhookRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Headers | Readonly<Record<string, string | readonly string[] | undefined>>;
  /** The body exactly as received: the digest is over these bytes, not over a re-serialized object. */
  readonly body: string | Uint8Array;
}

/** One status change of one of the service's intents, or a refund of one: the object GET /events lists. */
export interface WebhookEvent {
  readonly cursor: string;
  /** intent: a status change of the intent; refund: a refund of it (statusFrom null, statusTo the refund's status). */
  readonly type: 'intent' | 'refund';
  /** The refund, on a `refund` event only. */
  readonly refundId?: string;
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
      /** The event's cursor, from the signed body: the same on every attempt, so store it and drop a repeat. */
      readonly idempotencyKey: string;
    }
  | { readonly valid: false; readonly reason: string };

/** The window the service itself allows a signed request: a captured webhook cannot be replayed later. */
export const WEBHOOK_SIGNATURE_WINDOW_S = 60;

const utf8 = new TextEncoder();
const CREATED = new RegExp(`^${SIGNATURE_LABEL}=\\([^)]*\\);created=(\\d{1,15});`);
const SIGNATURE = new RegExp(`^${SIGNATURE_LABEL}=:([A-Za-z0-9+/]+={0,2}):$`);

function header(headers: WebhookRequest['headers'], name: string): string | undefined {
  if (headers instanceof Headers) return headers.get(name)?.trim() ?? undefined;
  const value = headers[name];
  // A repeated field would be joined into a list the sender never signed.
  return typeof value === 'string' ? value.trim() : undefined;
}

const pathOf = (url: string): string => {
  const target = /^https?:\/\//i.test(url) ? new URL(url).pathname : url;
  const at = target.indexOf('?');
  return at === -1 ? target : target.slice(0, at);
};

const base64Bytes = (text: string): Uint8Array<ArrayBuffer> => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
const sha256 = async (bytes: Uint8Array<ArrayBuffer>) => new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));

async function hmacVerifies(secret: string, signature: Uint8Array<ArrayBuffer>, base: string): Promise<boolean> {
  const key = await crypto.subtle.importKey('raw', utf8.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
  // Web Crypto compares in constant time.
  return crypto.subtle.verify('HMAC', key, signature, utf8.encode(base));
}

/**
 * Checks that a webhook came from payorch for this service (docs/OPERATIONS.md, Webhooks): the
 * RFC 9421 signature with keyid "payorch" under the service's `secret`, covering exactly
 * "@method" "@path" "content-digest" with `created` within ±60 s of `nowS`, and the
 * Content-Digest matching the body. Answer 2xx only to a valid one, once it is stored.
 */
export async function verifyWebhook(
  request: WebhookRequest,
  secret: string,
  nowS = Math.floor(Date.now() / 1000),
): Promise<VerifiedWebhook> {
  const invalid = (reason: string): VerifiedWebhook => ({ valid: false, reason });
  if (request.method.toUpperCase() !== 'POST') return invalid('a webhook is a POST');
  const signatureInput = header(request.headers, 'signature-input');
  const signature = header(request.headers, 'signature');
  const digest = header(request.headers, 'content-digest');
  if (signatureInput === undefined || signature === undefined || digest === undefined)
    return invalid('missing Signature-Input, Signature or Content-Digest');
  const created = CREATED.exec(signatureInput)?.[1];
  if (created === undefined) return invalid('malformed Signature-Input');
  const expected = webhookSignatureInput(pathOf(request.url), digest, Number(created));
  if (expected.signatureInput !== signatureInput) return invalid('Signature-Input is not that of a payorch webhook to this path');
  if (Math.abs(nowS - Number(created)) > WEBHOOK_SIGNATURE_WINDOW_S) return invalid('signature created outside the ±60 s window');
  const body = typeof request.body === 'string' ? utf8.encode(request.body) : new Uint8Array(request.body);
  if (contentDigestOf(await sha256(body)) !== digest) return invalid('content digest mismatch');
  const mac = SIGNATURE.exec(signature)?.[1];
  if (mac === undefined) return invalid('malformed Signature');
  if (!(await hmacVerifies(secret, base64Bytes(mac), expected.base))) return invalid('invalid signature');
  const event = JSON.parse(new TextDecoder().decode(body)) as WebhookEvent;
  return { valid: true, event, idempotencyKey: event.cursor };
}
