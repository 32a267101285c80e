/**
 * The payorch client: typed methods for every endpoint, every request signed (an HTTP Message
 * Signature by default, docs/SECURITY.md section 2), retries only where docs/rules.md, Retries, allows them.
 * `import { createPayorchClient } from 'payorch'`.
 */
export {
  createPayorchClient,
  type PayorchClient,
  type PayorchClientOptions,
  type PayorchCredentials,
  type RawAnswer,
  type UserOptions,
} from './payorch-client.js';
export type { AdminApi, AdminCollection } from './admin-api.js';
export { PayorchConnectionError, PayorchError, type PayorchErrorBody, type PayorchErrorCode } from './payorch-error.js';
export type { ClientRequest } from './requester.js';
export {
  backoffMs,
  DEFAULT_RETRY,
  REQUEST_TIMEOUT_MS,
  RETRY_DELAY_MAX_MS,
  type HttpMethod,
  type RetryPolicy,
  type SignatureScheme,
} from './transport.js';
export type * from './types.js';
export { type VerifiedWebhook, verifyWebhook, type WebhookEvent, type WebhookRequest } from './verify-webhook.js';
