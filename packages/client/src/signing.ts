/**
 * Request signing, both schemes the service accepts (docs/SECURITY.md section 2). What goes into a
 * signature is built here once, as plain strings, and the service verifies against the same
 * construction (it imports these functions); the hashing is Web Crypto, which Node 20+ and every
 * browser with fetch provide, so the client needs no dependency and no Node built-in.
 */

export const MESSAGE_SIGNATURE_ALG = 'hmac-sha256';
/** The label the client gives its signature; the server accepts any one label. */
export const SIGNATURE_LABEL = 'sig1';
/** Random bytes in a nonce the client makes: 128 bits cannot repeat by chance within the replay window. */
const NONCE_BYTES = 16;

/** A covered component: its identifier (`@method`, `x-user-id`) and its value in the signature base. */
export type Component = readonly [name: string, value: string];

const utf8 = new TextEncoder();

/** Standard base64; btoa exists in Node 20 and browsers, and a digest is a few dozen bytes. */
export function base64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

const base64url = (bytes: Uint8Array): string => base64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

export const hex = (bytes: Uint8Array): string => Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');

/** RFC 9530 Content-Digest from the SHA-256 of the body bytes as sent: `sha-256=:<base64>:`. */
export const contentDigestOf = (sha256: Uint8Array): string => `sha-256=:${base64(sha256)}:`;

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

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

export const freshNonce = (): string => base64url(crypto.getRandomValues(new Uint8Array(NONCE_BYTES)));

/** A message signature's headers but `signature`, and the base that the HMAC of `signature` is taken over. */
export interface MessageSignatureInput {
  readonly headers: Record<string, string>;
  readonly base: string;
}

/**
 * Covers `@method`, `@path`, `@query`, `content-digest` for a body and `x-user-id` when one is
 * sent (docs/SECURITY.md section 2). `contentDigest`: the header value for the body, undefined
 * when there is none.
 */
export function messageSignatureInput(
  serviceId: string,
  method: string,
  pathWithQuery: string,
  contentDigest: string | undefined,
  options: MessageSigningOptions,
): MessageSignatureInput {
  const { path, query } = pathAndQuery(pathWithQuery);
  const components: Component[] = [
    ['@method', method.toUpperCase()],
    ['@path', path],
    ['@query', query],
  ];
  const headers: Record<string, string> = { 'x-service-id': serviceId };
  if (contentDigest !== undefined) {
    headers['content-digest'] = contentDigest;
    components.push(['content-digest', contentDigest]);
  }
  if (options.userId !== undefined) {
    headers['x-user-id'] = String(options.userId);
    // RFC 9421 §2.1: the value in the base is the field without surrounding whitespace, as the server reads it.
    components.push(['x-user-id', headers['x-user-id'].trim()]);
  }
  const params = serializeSignatureParams(
    components.map(([name]) => name),
    { keyid: serviceId, created: options.nowS ?? nowSeconds(), nonce: options.nonce ?? freshNonce(), alg: MESSAGE_SIGNATURE_ALG },
  );
  headers['signature-input'] = `${SIGNATURE_LABEL}=${params}`;
  return { headers, base: signatureBase(components, params) };
}

/** The Signature header from the HMAC-SHA256 of the base. */
export const signatureHeader = (mac: Uint8Array): string => `${SIGNATURE_LABEL}=:${base64(mac)}:`;

/** The older scheme (docs/rules.md R1): timestamp, upper-case method, path with query, SHA-256 hex of the raw body; joined by '\n'. */
export const xSignatureSigningString = (timestamp: string | number, method: string, pathWithQuery: string, bodySha256Hex: string): string =>
  `${timestamp}\n${method.toUpperCase()}\n${pathWithQuery}\n${bodySha256Hex}`;

/** The headers of the older scheme, its signature being the hex HMAC-SHA256 of the signing string. */
export const xSignatureHeaders = (serviceId: string, timestamp: string, signatureHex: string, userId?: number | string) => ({
  'x-service-id': serviceId,
  'x-timestamp': timestamp,
  'x-signature': signatureHex,
  ...(userId === undefined ? {} : { 'x-user-id': String(userId) }),
});

/**
 * 'message': an HTTP Message Signature (RFC 9421) that also covers X-User-Id and carries a fresh
 * nonce. 'x-signature': the older scheme (docs/rules.md R1), for servers that predate the other one.
 */
export type SignatureScheme = 'message' | 'x-signature';

/** Signs with one service secret; the key is imported once and kept non-extractable. */
export interface RequestSigner {
  sign(method: string, pathWithQuery: string, rawBody: string, options?: MessageSigningOptions): Promise<Record<string, string>>;
}

const sha256 = async (data: Uint8Array<ArrayBuffer>): Promise<Uint8Array> => new Uint8Array(await crypto.subtle.digest('SHA-256', data));

export function createSigner(serviceId: string, secret: string, scheme: SignatureScheme): RequestSigner {
  // Web Crypto refuses an empty HMAC key, and the service holds no such secret: say so now, not at the first request.
  if (secret === '') throw new RangeError('the service secret is empty');
  // Spelled through `crypto`: Node's types have no global CryptoKey.
  let key: ReturnType<typeof crypto.subtle.importKey> | undefined;
  const hmac = async (text: string): Promise<Uint8Array> => {
    key ??= crypto.subtle.importKey('raw', utf8.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    return new Uint8Array(await crypto.subtle.sign('HMAC', await key, utf8.encode(text)));
  };
  return {
    async sign(method, pathWithQuery, rawBody, options = {}) {
      const bodyHash = await sha256(utf8.encode(rawBody));
      if (scheme === 'x-signature') {
        const timestamp = String(options.nowS ?? nowSeconds());
        const mac = await hmac(xSignatureSigningString(timestamp, method, pathWithQuery, hex(bodyHash)));
        return xSignatureHeaders(serviceId, timestamp, hex(mac), options.userId);
      }
      const digest = rawBody === '' ? undefined : contentDigestOf(bodyHash);
      const { headers, base } = messageSignatureInput(serviceId, method, pathWithQuery, digest, options);
      headers.signature = signatureHeader(await hmac(base));
      return headers;
    },
  };
}
