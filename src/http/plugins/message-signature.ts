import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { apiError } from '../../domain/errors.js';
import { type Component, MESSAGE_SIGNATURE_ALG, pathAndQuery, signatureBase } from '../../domain/auth/message-signing.js';
import { SIGNATURE_WINDOW_S } from '../../domain/auth/signing.js';
import { parseContentDigest, parseSignature, parseSignatureInput, type SignatureInput } from './message-signature-fields.js';

/** A request whose HTTP Message Signature verified: who signed, and what the replay guards key on. */
export interface VerifiedMessage {
  readonly serviceId: string;
  readonly signature: Buffer;
  readonly nonce: string | undefined;
}

/** What verification reads of a request; a FastifyRequest is one. */
export interface SignedMessage {
  readonly method: string;
  /** The request target as sent: path and query, not decoded. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawBody: Buffer;
}

const unauthorized = (message: string) => apiError('UNAUTHORIZED', message);

/**
 * How far ahead of this server's clock `created` may be: clock skew, not a window. A signature
 * dated ahead would otherwise stay valid, and its replay record live, for longer (docs/rules.md R61).
 */
export const CREATED_AHEAD_MAX_S = 5;

/** RFC 9421 §2.1: the field as the application reads it (repeated lines joined by `, `), trimmed. */
function headerValue(request: SignedMessage, name: string): string | undefined {
  const value = request.headers[name];
  if (value === undefined) return undefined;
  return (Array.isArray(value) ? value.map((line) => line.trim()).join(', ') : value).trim();
}

/** The components every signature must cover: the request line, and whatever says who acts and what is sent. */
function requiredComponents(request: SignedMessage): string[] {
  const required = ['@method', '@path', '@query'];
  if (request.rawBody.length > 0) required.push('content-digest');
  if (request.headers['x-user-id'] !== undefined) required.push('x-user-id');
  return required;
}

/** Derived components from the request line as sent: no decoding, no normalisation. */
function componentValue(request: SignedMessage, name: string): string {
  const { path, query } = pathAndQuery(request.url);
  switch (name) {
    case '@method':
      return request.method;
    case '@path':
      return path;
    case '@query':
      return query;
    case '@authority': {
      const host = headerValue(request, 'host');
      if (host === undefined) throw unauthorized('covered component @authority has no Host');
      return host.toLowerCase();
    }
    default: {
      if (name.startsWith('@')) throw unauthorized(`unsupported covered component ${name}`);
      const value = headerValue(request, name);
      if (value === undefined) throw unauthorized(`covered header ${name} is absent`);
      return value;
    }
  }
}

/** Content-Digest is required for a body and checked whenever sent; sha-256 over the raw bytes. */
function checkContentDigest(request: SignedMessage): void {
  const header = headerValue(request, 'content-digest');
  if (header === undefined) {
    if (request.rawBody.length > 0) throw unauthorized('missing header Content-Digest');
    return;
  }
  const expected = createHash('sha256').update(request.rawBody).digest();
  const given = parseContentDigest(header);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw unauthorized('content digest mismatch');
}

function checkParameters(input: SignatureInput, request: SignedMessage, nowS: number): void {
  if (input.alg !== undefined && input.alg !== MESSAGE_SIGNATURE_ALG) throw unauthorized(`unsupported alg ${input.alg}`);
  const serviceId = headerValue(request, 'x-service-id');
  if (serviceId !== undefined && serviceId !== input.keyid) throw unauthorized('keyid does not match X-Service-Id');
  if (Math.abs(nowS - input.created) > SIGNATURE_WINDOW_S || input.created - nowS > CREATED_AHEAD_MAX_S) {
    throw unauthorized('timestamp outside window');
  }
  if (input.expires !== undefined && input.expires < nowS) throw unauthorized('signature expired');
  for (const name of requiredComponents(request)) {
    if (!input.components.includes(name)) throw unauthorized(`missing covered component ${name}`);
  }
}

/**
 * Verifies the request's HTTP Message Signature (docs/SECURITY.md §2). `secretsOf` answers the
 * service's secrets; every one is tried, so a rotated list verifies with any of its entries.
 */
export function verifyMessageSignature(
  request: SignedMessage,
  signatureInputHeader: string,
  secretsOf: (serviceId: string) => readonly string[] | undefined,
  nowS: number,
): VerifiedMessage {
  const input = parseSignatureInput(signatureInputHeader);
  const signatureHeader = headerValue(request, 'signature');
  if (signatureHeader === undefined) throw unauthorized('missing header Signature');
  const signature = parseSignature(signatureHeader, input.label);
  checkParameters(input, request, nowS);
  const secrets = secretsOf(input.keyid);
  if (secrets === undefined) throw unauthorized('unknown service');
  checkContentDigest(request);
  const components: Component[] = input.components.map((name) => [name, componentValue(request, name)]);
  const base = signatureBase(components, input.rawParams);
  let matched = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(base, 'utf8').digest();
    // Every secret is checked, so the time taken does not tell which one matched.
    matched = (expected.length === signature.length && timingSafeEqual(expected, signature)) || matched;
  }
  if (!matched) throw unauthorized('invalid signature');
  return { serviceId: input.keyid, signature, nonce: input.nonce };
}
