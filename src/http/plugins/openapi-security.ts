/**
 * How a request proves who sent it, as the OpenAPI document states it (docs/SECURITY.md §2). A
 * scheme in OpenAPI names one header; a requirement that lists several means all of them, so each
 * way of signing is one requirement naming every header it needs.
 */
export const SECURITY_SCHEMES = {
  messageSignature: {
    type: 'apiKey',
    in: 'header',
    name: 'Signature',
    description:
      'HTTP Message Signature (RFC 9421), HMAC-SHA256 with the service secret: `sig=:base64:` over the signature base of ' +
      'the components listed in Signature-Input. Sent with Signature-Input, and with Content-Digest when there is a body.',
  },
  signatureInput: {
    type: 'apiKey',
    in: 'header',
    name: 'Signature-Input',
    description:
      'RFC 9421 signature parameters: keyid = the service id, created = Unix seconds (±60 s), alg "hmac-sha256" ' +
      '(optional), nonce (optional); the covered components include "@method", "@path", "@query", "content-digest" ' +
      'when there is a body and "x-user-id" whenever X-User-Id is sent. X-Service-Id may be sent too; it must then equal keyid.',
  },
  serviceId: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Service-Id',
    description: 'The calling service, as named in its service key (X-Signature scheme).',
  },
  timestamp: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Timestamp',
    description: 'Unix seconds when the request was signed; refused when more than 60 s away from the server clock (X-Signature scheme).',
  },
  signature: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Signature',
    description: 'Lower-case hex HMAC-SHA256 with the service secret over `X-Timestamp\\nMETHOD\\npath?query\\nhex sha256(raw body)`.',
  },
  adminToken: {
    type: 'http',
    scheme: 'bearer',
    description: 'ADMIN_TOKEN, for /admin routes only (the operator console).',
  },
} as const;

type SchemeName = keyof typeof SECURITY_SCHEMES;
type Requirement = Partial<Record<SchemeName, []>>;

/** Either signature: every route but the public ones. */
export const SIGNED_SECURITY: Requirement[] = [
  { messageSignature: [], signatureInput: [] },
  { serviceId: [], timestamp: [], signature: [] },
];

/** Both signatures or the admin bearer token (docs/rules.md R11). */
export const ADMIN_SECURITY: Requirement[] = [...SIGNED_SECURITY, { adminToken: [] }];
