/**
 * The payorch client: typed methods for every endpoint, every request signed (an HTTP Message
 * Signature by default, docs/SECURITY.md section 2), retries only where docs/rules.md, Retries, allows them.
 * `import { createPayorchClient } from '@payorch/client'` (or from 'payorch', which re-exports this).
 */
export {
  createPayorchClient,
  type PayorchClient,
  type PayorchClientOptions,
  type PayorchCredentials,
  type RawAnswer,
  type UserOptions,
} from './payorch-client.js';
export { EVENT_POLL_INTERVAL_MS, type EventIterationOptions } from './event-feed.js';
export { ADMIN_COLLECTION_PATHS, type AdminApi, type AdminCollection } from './admin-api.js';
export { PayorchConnectionError, PayorchError, type PayorchErrorBody, type PayorchErrorCode } from './payorch-error.js';
export type { ClientRequest } from './requester.js';
export {
  backoffMs,
  DEFAULT_RETRY,
  DEFAULT_SIGNATURE_SCHEME,
  REQUEST_TIMEOUT_MS,
  RETRY_DELAY_MAX_MS,
  type HttpMethod,
  type RetryPolicy,
} from './transport.js';
export {
  createEventStreamParser,
  EVENT_CHARS_MAX,
  type EventStreamParser,
  type ServerSentEvent,
  serverSentEvents,
} from './event-stream.js';
export {
  type Component,
  contentDigestOf,
  createSigner,
  MESSAGE_SIGNATURE_ALG,
  type MessageSignatureInput,
  type MessageSigningOptions,
  messageSignatureInput,
  pathAndQuery,
  type RequestSigner,
  SIGNATURE_LABEL,
  type SignatureParams,
  type SignatureScheme,
  serializeSignatureParams,
  signatureBase,
  signatureHeader,
  WEBHOOK_KEYID,
  webhookSignatureInput,
  xSignatureHeaders,
  xSignatureSigningString,
} from './signing.js';
export * from './vocabulary.js';
export type * from './types.js';
export {
  type VerifiedWebhook,
  verifyWebhook,
  WEBHOOK_SIGNATURE_WINDOW_S,
  type WebhookEvent,
  type WebhookRequest,
} from './verify-webhook.js';
