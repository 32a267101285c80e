import { createHash, createHmac } from 'node:crypto';
import {
  contentDigestOf,
  type MessageSigningOptions,
  messageSignatureInput,
  signatureHeader,
  webhookSignatureInput,
} from '@payorch/client';

/**
 * HTTP Message Signatures (RFC 9421) with HMAC-SHA256, as docs/SECURITY.md section 2 describes.
 * What a signature covers and how its base is written is the client package's (one construction,
 * which the server's verifier imports too, src/http/plugins/message-signature.ts); this adds the
 * synchronous node:crypto hashing for the service's own callers (tests, bench), where the client
 * uses Web Crypto.
 */
export {
  type Component,
  MESSAGE_SIGNATURE_ALG,
  type MessageSigningOptions,
  pathAndQuery,
  SIGNATURE_LABEL,
  type SignatureParams,
  serializeSignatureParams,
  signatureBase,
} from '@payorch/client';

/** RFC 9530: `sha-256=:<base64 of the digest>:` over the body bytes as sent. */
export const contentDigest = (rawBody: string | Uint8Array): string => contentDigestOf(createHash('sha256').update(rawBody).digest());

/** base64 of HMAC-SHA256 over the signature base, keyed by the secret's UTF-8 bytes. */
export const messageSignature = (secret: string, base: string): string =>
  createHmac('sha256', secret).update(base, 'utf8').digest('base64');

/** The headers of a request signed with an HTTP Message Signature, as the client sends them. */
export function messageSignedHeaders(
  serviceId: string,
  secret: string,
  method: string,
  pathWithQuery: string,
  rawBody: string,
  options: MessageSigningOptions = {},
): Record<string, string> {
  const digest = rawBody === '' ? undefined : contentDigest(rawBody);
  const { headers, base } = messageSignatureInput(serviceId, method, pathWithQuery, digest, options);
  headers.signature = signatureHeader(createHmac('sha256', secret).update(base, 'utf8').digest());
  return headers;
}

/**
 * Content-Digest, Signature-Input and Signature of a webhook POST to `path`, signed with the
 * receiving service's secret (the construction is the client's, which verifyWebhook checks).
 */
export function webhookSignedHeaders(
  secret: string,
  path: string,
  rawBody: string,
  nowS = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const digest = contentDigest(rawBody);
  const { signatureInput, base } = webhookSignatureInput(path, digest, nowS);
  return {
    'content-digest': digest,
    'signature-input': signatureInput,
    signature: signatureHeader(createHmac('sha256', secret).update(base, 'utf8').digest()),
  };
}
