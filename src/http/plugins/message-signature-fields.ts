import { type BareItem, type InnerList, isInnerList, parseDictionary, parseList } from 'structured-headers';
import { apiError } from '../../domain/errors.js';

/** Far more than the five components the rule asks for; it bounds the work an unsigned request can cause. */
const COMPONENTS_MAX = 32;
/** A nonce is a key in the replay cache: bounded so that a caller cannot fill it with long ones. */
const NONCE_LENGTH_MAX = 128;

export interface SignatureInput {
  readonly label: string;
  /** The inner list exactly as sent: the `@signature-params` line of the signature base. */
  readonly rawParams: string;
  readonly components: readonly string[];
  readonly keyid: string;
  readonly created: number;
  readonly expires: number | undefined;
  readonly alg: string | undefined;
  readonly nonce: string | undefined;
}

const unauthorized = (message: string) => apiError('UNAUTHORIZED', message);

function parsed<T>(field: string, parse: () => T): T {
  try {
    return parse();
  } catch {
    throw unauthorized(`malformed ${field}`);
  }
}

/** A component name: `@` and a lower-case name (derived), or a lower-case header name; the signature base writes either unescaped. */
const COMPONENT_NAME = /^@?[a-z0-9!#$%&'*+.^_`|~-]+$/;

function componentNames(list: InnerList): string[] {
  const [items] = list;
  if (items.length > COMPONENTS_MAX) throw unauthorized(`more than ${COMPONENTS_MAX} covered components`);
  const names = items.map(([value, params]) => {
    if (typeof value !== 'string' || !COMPONENT_NAME.test(value)) throw unauthorized('malformed covered component');
    // ;sf, ;key, ;bs, ;req and ;name change how a value is taken; none is needed for these requests.
    if (params.size > 0) throw unauthorized(`unsupported parameters on covered component ${value}`);
    return value;
  });
  if (new Set(names).size !== names.length) throw unauthorized('duplicate covered component');
  return names;
}

const KNOWN_PARAMS = new Set(['created', 'expires', 'keyid', 'alg', 'nonce', 'tag']);

function stringParam(params: ReadonlyMap<string, BareItem>, name: string): string | undefined {
  const value = params.get(name);
  if (value !== undefined && typeof value !== 'string') throw unauthorized(`signature parameter ${name} must be a string`);
  return value;
}

function integerParam(params: ReadonlyMap<string, BareItem>, name: string): number | undefined {
  const value = params.get(name);
  if (value !== undefined && (typeof value !== 'number' || !Number.isInteger(value)))
    throw unauthorized(`signature parameter ${name} must be an integer`);
  return value;
}

/**
 * Signature-Input with exactly one label. Its inner list is also taken as the text that follows
 * `label=`, because the signature base holds it as sent; that text must parse as one inner list
 * on its own, so a repeated label cannot smuggle a second list into the base.
 */
export function parseSignatureInput(header: string): SignatureInput {
  const dictionary = parsed('Signature-Input', () => parseDictionary(header));
  const [entry, ...others] = dictionary;
  if (entry === undefined || others.length > 0) throw unauthorized('Signature-Input must hold exactly one signature');
  const [label, member] = entry;
  const text = header.trim();
  const rawParams = text.slice(label.length + 1);
  const [alone, ...more] = parsed('Signature-Input', () => parseList(rawParams));
  if (!isInnerList(member) || !text.startsWith(`${label}=`) || alone === undefined || more.length > 0 || !isInnerList(alone)) {
    throw unauthorized('malformed Signature-Input');
  }
  const params = member[1];
  for (const name of params.keys()) if (!KNOWN_PARAMS.has(name)) throw unauthorized(`unsupported signature parameter ${name}`);
  const keyid = stringParam(params, 'keyid');
  const created = integerParam(params, 'created');
  if (keyid === undefined) throw unauthorized('missing signature parameter keyid');
  if (created === undefined) throw unauthorized('missing signature parameter created');
  const nonce = stringParam(params, 'nonce');
  if (nonce !== undefined && (nonce.length === 0 || nonce.length > NONCE_LENGTH_MAX))
    throw unauthorized(`nonce must have 1 to ${NONCE_LENGTH_MAX} characters`);
  stringParam(params, 'tag');
  return {
    label,
    rawParams,
    components: componentNames(member),
    keyid,
    created,
    expires: integerParam(params, 'expires'),
    alg: stringParam(params, 'alg'),
    nonce,
  };
}

/** The signature bytes under `label`, the only label Signature may carry. */
export function parseSignature(header: string, label: string): Buffer {
  const dictionary = parsed('Signature', () => parseDictionary(header));
  const member = dictionary.get(label);
  if (dictionary.size !== 1 || member === undefined)
    throw unauthorized('Signature must hold exactly the signature labelled in Signature-Input');
  if (isInnerList(member) || !(member[0] instanceof ArrayBuffer)) throw unauthorized('malformed Signature');
  return Buffer.from(member[0]);
}

/** The sha-256 digest in Content-Digest (RFC 9530); other algorithms may be listed beside it but are not checked. */
export function parseContentDigest(header: string): Buffer {
  const dictionary = parsed('Content-Digest', () => parseDictionary(header));
  const member = dictionary.get('sha-256');
  if (member === undefined) throw unauthorized('Content-Digest must carry sha-256');
  if (isInnerList(member) || !(member[0] instanceof ArrayBuffer)) throw unauthorized('malformed Content-Digest');
  return Buffer.from(member[0]);
}
