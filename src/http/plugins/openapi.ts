import { STATUS_CODES } from 'node:http';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify';
import { type ErrorCode, ERROR_STATUS } from '../../domain/errors.js';
import { componentRef, documentedComponents, withComponentRefs } from '../openapi-components.js';
import { codesByStatus, type RouteError } from '../schemas/shared.js';
import { SECURITY_SCHEMES, SIGNED_SECURITY } from './openapi-security.js';

const DESCRIPTION =
  'Payment orchestration: signed payment intents, a double-entry ledger, merchant invoices and PSPX payouts. ' +
  'Every endpoint except /health, /metrics, /openapi.json, /docs and /console needs a signature: an HTTP Message ' +
  'Signature (RFC 9421, HMAC-SHA256: Signature-Input, Signature, Content-Digest; it covers X-User-Id), or the HMAC ' +
  'signature headers (X-Service-Id, X-Timestamp, X-Signature over `timestamp\\nMETHOD\\npath?query\\nsha256(body)`). ' +
  'docs/SECURITY.md section 2 has both. Every error answers `{error, message?, detail?}`; clients decide on `error`, ' +
  'whose possible values each response lists.';

const TAGS = [
  { name: 'intents', description: 'Payment intents of the calling service' },
  { name: 'invoices', description: 'Two-phase merchant invoices: confirm and cancel' },
  { name: 'accounts', description: 'Ledger accounts, balances, history and PSPX wallets' },
  { name: 'policies', description: 'Step-up decisions' },
  { name: 'events', description: "The calling service's status changes as a durable feed" },
  { name: 'admin', description: 'Operator API: a key with admin permission, or the admin bearer token' },
  { name: 'health', description: 'Probes, metrics and this document (no signature)' },
  { name: 'console', description: 'The operator console (no signature; it calls the admin API)' },
];

type Route = RouteOptions & { schema?: FastifySchema & { body?: unknown; params?: unknown; querystring?: unknown; hide?: boolean } };

/**
 * What the plugins answer before or around any route's own work: authentication and its replay
 * guards (auth.ts, replay-guard.ts), rate limits (throttle.ts), body parsing and schema validation
 * (errors.ts), and the last-resort 500. A route lists only what its own work adds (schemas.ts).
 */
function commonErrors(route: Route): RouteError[] {
  const { schema, config } = route;
  const signed = (config?.auth ?? 'service') !== 'none';
  const validated = schema?.body !== undefined || schema?.params !== undefined || schema?.querystring !== undefined;
  // Fastify parses a body on every method but GET and HEAD, whether or not the route expects one.
  const parsesBody = [route.method].flat().some((method) => method !== 'GET' && method !== 'HEAD');
  const signedErrors: ErrorCode[] = ['BAD_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED', 'SERVICE_UNAVAILABLE'];
  const bodyErrors: ErrorCode[] = ['PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE'];
  return [
    ...(signed ? signedErrors : []),
    ...(parsesBody ? bodyErrors : []),
    ...(validated ? [[config?.validationStatus ?? ERROR_STATUS.VALIDATION_ERROR, 'VALIDATION_ERROR'] as const] : []),
    'INTERNAL_ERROR',
  ];
}

/** The codes a route's schema lists under one error status (schemas.ts, responses()). */
function listedCodes(schema: unknown): ErrorCode[] {
  const codes = (schema as { properties?: { error?: { enum?: unknown } } } | undefined)?.properties?.error?.enum;
  return Array.isArray(codes) ? (codes as ErrorCode[]) : [];
}

const json = (schema: unknown) => ({ 'application/json': { schema } });
const hasContent = (response: object): response is { content: object } => 'content' in response;

/** A response that names its media types itself (a statement: json, csv or XML) refers to components too. */
const contentWithRefs = (content: Record<string, { schema: unknown }>) =>
  Object.fromEntries(Object.entries(content).map(([type, media]) => [type, { ...media, schema: withComponentRefs(media.schema) }]));

/**
 * The route's responses as the document shows them: each success body under its status's name,
 * and per error status the Error component narrowed to the codes the route can answer there.
 */
function documentedResponses(route: Route): Record<string, unknown> {
  const declared = (route.schema?.response ?? {}) as Record<string, object>;
  const routeErrors: RouteError[] = [...commonErrors(route)];
  const documented: Record<string, unknown> = {};
  for (const [status, schema] of Object.entries(declared)) {
    if (Number(status) >= 400 && listedCodes(schema).length > 0) {
      routeErrors.push(...listedCodes(schema).map((code): RouteError => [Number(status), code]));
      continue;
    }
    documented[status] = hasContent(schema)
      ? { ...schema, content: contentWithRefs(schema.content as Record<string, { schema: unknown }>) }
      : { description: STATUS_CODES[status] ?? status, content: json(withComponentRefs(schema)) };
  }
  for (const [status, codes] of codesByStatus(routeErrors)) {
    if (documented[status] !== undefined) continue;
    documented[status] = {
      description: STATUS_CODES[status] ?? String(status),
      content: json({
        allOf: [componentRef('Error'), { type: 'object', required: ['error'], properties: { error: { enum: codes } } }],
      }),
    };
  }
  return documented;
}

/** Headers a route reads besides those of the signature schemes. */
function documentedHeaders(route: Route): object | undefined {
  const signed = (route.config?.auth ?? 'service') !== 'none';
  const properties: Record<string, object> = {};
  if (route.config?.userIdHeader === 'required') {
    properties['X-User-Id'] = {
      type: 'string',
      pattern: '^(0|[1-9][0-9]{0,15})$',
      description: 'The platform user acting (0: the admin bypass). An HTTP Message Signature must cover it.',
    };
  }
  if (signed && route.schema?.body !== undefined) {
    properties['Content-Digest'] = {
      type: 'string',
      description: 'RFC 9530 `sha-256=:base64:` of the raw body; required with an HTTP Message Signature when there is a body.',
    };
  }
  if (Object.keys(properties).length === 0) return undefined;
  return { type: 'object', properties, required: route.config?.userIdHeader === 'required' ? ['X-User-Id'] : [] };
}

/**
 * The route's schema as the document shows it. The route's own schema object is never changed:
 * it is what validates requests and serializes answers.
 */
function documentedSchema(route: Route): FastifySchema {
  const schema = route.schema ?? {};
  const headers = documentedHeaders(route);
  return {
    ...schema,
    ...(schema.body === undefined ? {} : { body: withComponentRefs(schema.body) }),
    ...(headers === undefined ? {} : { headers }),
    response: documentedResponses(route),
  };
}

/** The OpenAPI 3.1 document is generated from the same TypeBox schemas that validate requests. */
export async function registerOpenApi(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'payorch', version, description: DESCRIPTION, license: { name: 'Apache-2.0', identifier: 'Apache-2.0' } },
      servers: [{ url: '/', description: 'the service that serves this document' }],
      tags: TAGS,
      components: { securitySchemes: SECURITY_SCHEMES, schemas: documentedComponents() as Record<string, object> },
      security: SIGNED_SECURITY,
    },
    transform: ({ schema, url, route }) =>
      schema === undefined || (schema as { hide?: boolean }).hide === true
        ? { schema, url }
        : { schema: documentedSchema(route as Route), url },
  });
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/docs')) route.config = { ...route.config, auth: 'none' };
  });
  await app.register(swaggerUi, { routePrefix: '/docs', logLevel: 'warn' });
  app.get(
    '/openapi.json',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['health'],
        operationId: 'getOpenApiDocument',
        summary: 'This OpenAPI 3.1 document (no signature)',
        security: [],
        // additionalProperties: the serializer then writes the document as it is.
        response: {
          200: { description: 'OpenAPI 3.1', content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } } },
        },
      },
    },
    async () => app.swagger(),
  );
}
