import { createHash, createHmac, randomBytes } from 'node:crypto';

/**
 * HTTP Message Signatures (RFC 9421) with HMAC-SHA256, as docs/SECURITY.md section 2 describes:
 * the pieces a client and the server share. No structured-field parser here: the client only
 * serialises values it made itself, and the server parses with a real one
 * (src/http/plugins/message-signature.ts), so this file stays free of dependencies.
 */

export const MESSAGE_SIGNATURE_ALG = 'hmac-sha256';
/** The label the client gives its signature; the server accepts any one label. */
export const SIGNATURE_LABEL = 'sig1';
/** Random bytes in a nonce the client makes: 128 bits cannot repeat by chance within the replay window. */
const NONCE_BYTES = 16;

/** A covered component: its identifier (`@method`, `x-user-id`) and its value in the signature base. */
export type Component = readonly [name: string, value: string];

/** RFC 9530: `sha-256=:<base64 of the digest>:` over the body bytes as sent. */
export const contentDigest = (rawBody: string | Uint8Array): string => `sha-256=:${createHash('sha256').update(rawBody).digest('base64')}:`;

/**
 * RFC 9421 §2.5: one line per covered component, `"name": value`, then the signature parameters.
 * Component names carry no parameters here (the server refuses those), so the identifier is the
 * name as an sf-string; names are lower-case tokens or `@` names, which need no escaping.
 */
export function signatureBase(components: readonly Component[], signatureParams: string): string {
  const lines = components.map(([name, value]) => `"${name}": ${value}`);
  lines.push(`"@signature-params": ${signatureParams}`);
  return lines.join('\n');
}

/** base64 of HMAC-SHA256 over the signature base, keyed by the secret's UTF-8 bytes. */
export const messageSignature = (secret: string, base: string): string =>
  createHmac('sha256', secret).update(base, 'utf8').digest('base64');

/** `@path` and `@query` from the path with its query as sent: the query keeps its `?`, and is `?` alone when there is none. */
export function pathAndQuery(pathWithQuery: string): { readonly path: string; readonly query: string } {
  const at = pathWithQuery.indexOf('?');
  return at === -1 ? { path: pathWithQuery, query: '?' } : { path: pathWithQuery.slice(0, at), query: pathWithQuery.slice(at) };
}

/** RFC 8941 sf-string; refuses what an sf-string cannot hold rather than sending a header the server cannot parse. */
function sfString(value: string): string {
  if (!/^[\x20-\x7e]*$/.test(value)) throw new RangeError(`not printable ASCII, cannot go into Signature-Input: ${JSON.stringify(value)}`);
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

export interface SignatureParams {
  readonly keyid: string;
  readonly created: number;
  readonly nonce?: string;
  readonly alg?: string;
}

/** The inner list of Signature-Input for `label=`: covered components in order, then created, keyid, nonce, alg. */
export function serializeSignatureParams(componentNames: readonly string[], params: SignatureParams): string {
  if (!Number.isSafeInteger(params.created) || params.created < 0)
    throw new RangeError(`created must be Unix seconds (got ${params.created})`);
  const list = `(${componentNames.map(sfString).join(' ')})`;
  const nonce = params.nonce === undefined ? '' : `;nonce=${sfString(params.nonce)}`;
  const alg = params.alg === undefined ? '' : `;alg=${sfString(params.alg)}`;
  return `${list};created=${params.created};keyid=${sfString(params.keyid)}${nonce}${alg}`;
}

export interface MessageSigningOptions {
  readonly userId?: number | string;
  readonly nowS?: number;
  /** Fresh random bytes when absent; fixed only for test vectors. */
  readonly nonce?: string;
}

/**
 * The headers of a request signed with an HTTP Message Signature: covers `@method`, `@path`,
 * `@query`, `content-digest` for a body and `x-user-id` when one is sent (docs/SECURITY.md §2).
 */
export function messageSignedHeaders(
  serviceId: string,
  secret: string,
  method: string,
  pathWithQuery: string,
  rawBody: string,
  options: MessageSigningOptions = {},
): Record<string, string> {
  const { path, query } = pathAndQuery(pathWithQuery);
  const components: Component[] = [
    ['@method', method.toUpperCase()],
    ['@path', path],
    ['@query', query],
  ];
  const headers: Record<string, string> = { 'x-service-id': serviceId };
  if (rawBody !== '') {
    headers['content-digest'] = contentDigest(rawBody);
    components.push(['content-digest', headers['content-digest']]);
  }
  if (options.userId !== undefined) {
    headers['x-user-id'] = String(options.userId);
    // RFC 9421 §2.1: the value in the base is the field without surrounding whitespace, as the server reads it.
    components.push(['x-user-id', headers['x-user-id'].trim()]);
  }
  const params = serializeSignatureParams(
    components.map(([name]) => name),
    {
      keyid: serviceId,
      created: options.nowS ?? Math.floor(Date.now() / 1000),
      nonce: options.nonce ?? randomBytes(NONCE_BYTES).toString('base64url'),
      alg: MESSAGE_SIGNATURE_ALG,
    },
  );
  return { ...headers, ...signatureHeaders(secret, components, params) };
}

/** Signature-Input and Signature for `components` under SIGNATURE_LABEL, with the serialized parameters. */
function signatureHeaders(secret: string, components: readonly Component[], params: string) {
  return {
    'signature-input': `${SIGNATURE_LABEL}=${params}`,
    signature: `${SIGNATURE_LABEL}=:${messageSignature(secret, signatureBase(components, params))}:`,
  };
}

/** The keyid of every webhook signature: the key is the receiving service's own secret, so the id names the sender. */
export const WEBHOOK_KEYID = 'payorch';
/** What a webhook signature covers (docs/OPERATIONS.md, Webhooks); a verifier requires each of them. */
export const WEBHOOK_COMPONENTS = ['@method', '@path', 'content-digest'] as const;

/**
 * Content-Digest, Signature-Input and Signature of a webhook POST to `path` (no query: the URL's
 * query is the receiver's own business and is not covered), signed with the receiving service's
 * secret. No nonce: a repeated delivery is meant, and the receiver tells it by its Idempotency-Key.
 */
export function webhookSignedHeaders(
  secret: string,
  path: string,
  rawBody: string,
  nowS = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const digest = contentDigest(rawBody);
  const values: Record<(typeof WEBHOOK_COMPONENTS)[number], string> = { '@method': 'POST', '@path': path, 'content-digest': digest };
  const components = WEBHOOK_COMPONENTS.map((name): Component => [name, values[name]]);
  const params = serializeSignatureParams(WEBHOOK_COMPONENTS, { keyid: WEBHOOK_KEYID, created: nowS });
  return { 'content-digest': digest, ...signatureHeaders(secret, components, params) };
}
