import { createHmac, hash, timingSafeEqual } from 'node:crypto';
import { xSignatureHeaders, xSignatureSigningString } from '@payorch/client';

/** ±60 s: a captured request cannot be replayed later than this. */
export const SIGNATURE_WINDOW_S = 60;

/** One-shot: a Hash object per call costs a request ~1 µs more (docs/perf-log/2026-11.md, "the intent id's random bytes"). */
export const sha256Hex = (data: string | Uint8Array): string => hash('sha256', data, 'hex');

/** docs/rules.md R1: timestamp, upper-case method, path with query, SHA-256 hex of the raw body; joined by '\n' (the client's construction). */
export const signingString = (timestamp: string | number, method: string, pathWithQuery: string, rawBody: string | Uint8Array): string =>
  xSignatureSigningString(timestamp, method, pathWithQuery, sha256Hex(rawBody));

export function signRequest(
  secret: string,
  timestamp: string | number,
  method: string,
  pathWithQuery: string,
  rawBody: string | Uint8Array,
): string {
  return createHmac('sha256', secret)
    .update(signingString(timestamp, method, pathWithQuery, rawBody))
    .digest('hex');
}

const HEX_SHA256 = /^[0-9a-f]{64}$/;

/** Constant-time over the bytes of the signature; true when any of the service's secrets verifies. */
export function signatureMatches(
  secrets: readonly string[],
  signature: string,
  timestamp: string,
  method: string,
  pathWithQuery: string,
  rawBody: string | Uint8Array,
): boolean {
  if (!HEX_SHA256.test(signature)) return false;
  const given = Buffer.from(signature, 'hex');
  const payload = signingString(timestamp, method, pathWithQuery, rawBody);
  let matched = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(payload).digest();
    // Every secret is checked, so the time taken does not tell which one matched.
    matched = timingSafeEqual(expected, given) || matched;
  }
  return matched;
}

/** Headers that a client sends with a signed request. */
export function signedHeaders(
  serviceId: string,
  secret: string,
  method: string,
  pathWithQuery: string,
  rawBody: string,
  options: { userId?: number | string; nowS?: number } = {},
): Record<string, string> {
  const timestamp = String(options.nowS ?? Math.floor(Date.now() / 1000));
  return xSignatureHeaders(serviceId, timestamp, signRequest(secret, timestamp, method, pathWithQuery, rawBody), options.userId);
}
