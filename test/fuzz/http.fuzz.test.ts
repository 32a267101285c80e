import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { HTTPMethods, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { ERROR_STATUS, type ErrorCode } from '../../src/domain/errors.js';
import { messageSignedHeaders } from '../../src/domain/auth/message-signing.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createMerchant, createUser, topUp } from '../support/payments.js';
import { payout, registerIpps } from '../support/workers.js';
import { OPERATION_TYPES } from '../../src/domain/model.js';

/**
 * Fuzzing of the whole HTTP surface. Every route of the live OpenAPI document (so a route added
 * later is fuzzed without touching this file) gets generated path parameters, query strings,
 * headers and bodies: valid-ish values drawn from the route's own schema, and hostile ones (wrong
 * types, huge numbers, deep nesting, unicode, lone surrogates and NUL in values and keys, crafted
 * cursors, numbers and instants out of range, SQL and path-traversal payloads, prototype-pollution
 * keys, oversized and duplicated headers). Most requests are signed correctly so that they get
 * past authentication into validation and the domain; some are not. Each answer must be one the
 * interface documents for that route (table below), never a 5xx outside it; no route accepts
 * what docs/SECURITY.md §6 refuses; afterwards the invariant audit is clean, Object.prototype is
 * untouched and /health answers.
 */

/** Per engine; the run stops at whichever comes first. */
const FUZZ_TIME_LIMIT_MS = 25_000;
const FUZZ_RUNS_MAX = 20_000;
/** Bounds on generated shapes: enough to be hostile, small enough to stay fast. */
const NESTING_DEPTH_MAX = 3;
const LONG_SEGMENT_CHARS = 4_000;
const DEEP_JSON_LEVELS = 2_000;
const OVERSIZED_HEADER_CHARS = 16_000;

const ADMIN_TOKEN = 'test-admin-token';
const USERS = [7201, 7202, 7203, 7204] as const;
const MERCHANT = 7207;
const MERCHANT_ACCOUNT = `merchant.${MERCHANT}.THB`;

// ---------------------------------------------------------------------------------------------
// What each route may answer: the interface's endpoints and error catalogue, docs/rules.md
// (R6, R11, R12, R14, R22, R28, R29, R34) and docs/design.md. Keyed as the OpenAPI document names
// the route. Every signed route may also answer the transport-level codes of GENERIC below.

type Allowed = readonly string[];

/** Any route: a body that is not JSON (400, auth plugin), too big (413, docs/rules.md R12), not JSON at all (415), a path that matches no route (404), a parameter against its schema (422, docs/rules.md R28). */
const GENERIC: Allowed = [
  '400 BAD_REQUEST',
  '404 NOT_FOUND',
  '413 PAYLOAD_TOO_LARGE',
  '415 UNSUPPORTED_MEDIA_TYPE',
  '422 VALIDATION_ERROR',
];
/** Any signed route: authentication (docs/rules.md R2), the key's permission step and rate limits (docs/SECURITY.md §5). */
const SIGNED: Allowed = ['401 UNAUTHORIZED', '403 FORBIDDEN', '429 RATE_LIMITED'];
/** The admin CRUD routes: 409 when a create collides with an existing key. */
const ADMIN_CRUD: Allowed = ['200', '201', '404 NOT_FOUND', '409 CONFLICT', '422 VALIDATION_ERROR'];

/** A fee rule whose expression does not compile or run is refused as the dry-run refuses it. */
const FEE_RULE_WRITE: Allowed = ['422 EVAL_ERROR'];

const ROUTE_TABLE: Readonly<Record<string, Allowed>> = {
  'GET /health': ['200', '503'],
  'GET /openapi.json': ['200'],
  'GET /metrics': ['200', '401 UNAUTHORIZED'],
  'POST /accounts': ['200', '201', '422 VALIDATION_ERROR'],
  'GET /accounts/{name}/balance': ['200', '404 NOT_FOUND', '422 VALIDATION_ERROR'],
  'GET /accounts/{name}/transactions': ['200', '422 VALIDATION_ERROR'],
  'POST /accounts/register-ipps': ['200', '201', '404 NOT_FOUND', '422 VALIDATION_ERROR', '503 PSPX_UNAVAILABLE'],
  'POST /policies/evaluate': ['200', '422 VALIDATION_ERROR'],
  'POST /intents': [
    '200',
    '201',
    '400 NO_ROUTE',
    '409 CONFLICT',
    '409 TRANSACTION_IN_PROGRESS',
    '422 VALIDATION_ERROR',
    '422 ACCOUNT_NOT_FOUND',
    '422 INSUFFICIENT_FUNDS',
    '422 LIMIT_EXCEEDED',
    '422 PSPX_NOT_REGISTERED',
    '422 PSPX_METADATA_INVALID',
    '422 EVAL_ERROR',
    // 500 LEDGER_TRANSFER_ERROR is documented, but design.md says it cannot happen in normal
    // operation (every account is checked first): here it would be a bug, so it is not allowed.
  ],
  'POST /intents/quote': ['200', '422 VALIDATION_ERROR', '422 EVAL_ERROR'],
  'GET /intents/{id}': ['200', '404 NOT_FOUND', '422 VALIDATION_ERROR'],
  'GET /intents/{id}/events': ['200', '404 NOT_FOUND', '422 VALIDATION_ERROR'],
  'GET /intents/{id}/stream': ['200', '404 NOT_FOUND', '422 VALIDATION_ERROR', '503 SERVICE_UNAVAILABLE'],
  'GET /events': ['200', '410 CURSOR_EXPIRED', '422 VALIDATION_ERROR'],
  'POST /intents/{id}/confirm': [
    '200',
    '400 VALIDATION_ERROR',
    '400 PAYER_ACCOUNT_USER_MISMATCH',
    '404 NOT_FOUND',
    '404 INTENT_NOT_FOUND',
    '404 PAYER_ACCOUNT_NOT_FOUND',
    '409 ALREADY_PROCESSED',
    '409 EXPIRED',
    '409 VERSION_MISMATCH',
    '409 TRANSACTION_IN_PROGRESS',
    '409 CONFLICT',
  ],
  'POST /intents/{id}/cancel': [
    '200',
    '400 CANCEL_NOT_SUPPORTED',
    '400 VALIDATION_ERROR',
    '403 UNAUTHORIZED_ACTOR',
    '404 NOT_FOUND',
    '404 INTENT_NOT_FOUND',
    '409 CANNOT_CANCEL',
    '422 VALIDATION_ERROR',
  ],
  'POST /admin/fee-rules/dry-run': ['200', '422 VALIDATION_ERROR', '422 EVAL_ERROR'],
  'GET /admin/audit': ['200', '422 VALIDATION_ERROR'],
  'GET /admin/intents': ['200', '422 VALIDATION_ERROR'],
  'GET /admin/intents/{id}': ['200', '404 NOT_FOUND', '422 VALIDATION_ERROR'],
  'POST /admin/intents/{id}/resolve': ['200', '404 NOT_FOUND', '422 VALIDATION_ERROR', '422 WRONG_STATUS', '409 CONFLICT'],
  'POST /admin/config/reload': ['200', '503 SERVICE_UNAVAILABLE'],
  'GET /admin/log-level': ['200'],
  'PUT /admin/log-level': ['200', '422 VALIDATION_ERROR'],
};
const PUBLIC_ROUTES = new Set(['GET /health', 'GET /openapi.json', 'GET /metrics']);

function allowedFor(routeKey: string, declared: readonly string[], isPublic: boolean): Set<string> {
  const feeRuleWrite = /^(POST|PATCH) \/admin\/fee-rules/.test(routeKey);
  const own = ROUTE_TABLE[routeKey] ?? (routeKey.includes(' /admin/') ? [...ADMIN_CRUD, ...(feeRuleWrite ? FEE_RULE_WRITE : [])] : null);
  // A route this table does not know yet (a console route, say): its own OpenAPI declaration,
  // with any catalogue code of the declared status. 5xx stays forbidden unless declared.
  const fromDeclaration = own === null ? declared : [];
  return new Set([...GENERIC, ...(isPublic ? [] : SIGNED), ...(own ?? []), ...fromDeclaration]);
}

// ---------------------------------------------------------------------------------------------
// The routes, read from the live OpenAPI document.

interface JsonSchema {
  readonly type?: string | readonly string[];
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly required?: readonly string[];
  readonly items?: JsonSchema;
  readonly enum?: readonly unknown[];
  readonly const?: unknown;
  readonly anyOf?: readonly JsonSchema[];
  readonly oneOf?: readonly JsonSchema[];
  readonly format?: string;
  readonly pattern?: string;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly maxLength?: number;
}
interface Operation {
  readonly parameters?: ReadonlyArray<{ readonly in: string; readonly name: string; readonly schema?: JsonSchema }>;
  readonly requestBody?: { readonly content?: Readonly<Record<string, { readonly schema?: JsonSchema }>> };
  readonly responses?: Readonly<Record<string, unknown>>;
  /** `[]`: the route needs no signature (docs/rules.md R37). */
  readonly security?: readonly unknown[];
}
interface Route {
  readonly method: string;
  readonly pattern: string;
  readonly key: string;
  readonly pathParams: readonly string[];
  readonly query: ReadonlyArray<{ readonly name: string; readonly schema: JsonSchema }>;
  readonly body: JsonSchema | null;
  readonly allowed: Set<string>;
  readonly isPublic: boolean;
}

interface OpenApiDocument {
  readonly paths?: Record<string, Record<string, Operation>>;
  readonly components?: { readonly schemas?: Readonly<Record<string, unknown>> };
}

const COMPONENT_REF = /^#\/components\/schemas\/(.+)$/;

/** The schema with every `$ref` to a component replaced by the component itself (none refers to itself). */
function inlined(node: unknown, document: OpenApiDocument): unknown {
  if (Array.isArray(node)) return node.map((item) => inlined(item, document));
  if (typeof node !== 'object' || node === null) return node;
  const ref = (node as { $ref?: unknown }).$ref;
  const name = typeof ref === 'string' ? COMPONENT_REF.exec(ref)?.[1] : undefined;
  if (name !== undefined) return inlined(document.components?.schemas?.[name], document);
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, inlined(value, document)]));
}

function routesOf(document: OpenApiDocument): Route[] {
  const routes: Route[] = [];
  for (const [pattern, operations] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(operations)) {
      const upper = method.toUpperCase();
      if (!['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].includes(upper)) continue;
      const key = `${upper} ${pattern}`;
      const declared = Object.keys(operation.responses ?? {});
      const isPublic = PUBLIC_ROUTES.has(key) || (Array.isArray(operation.security) && operation.security.length === 0);
      routes.push({
        isPublic,
        method: upper,
        pattern,
        key,
        pathParams: [...pattern.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? ''),
        query: (operation.parameters ?? [])
          .filter((p) => p.in === 'query')
          .map((p) => ({ name: p.name, schema: inlined(p.schema ?? {}, document) as JsonSchema })),
        body: (inlined(operation.requestBody?.content?.['application/json']?.schema, document) as JsonSchema | undefined) ?? null,
        allowed: allowedFor(key, declared, isPublic),
      });
    }
  }
  return routes;
}

// ---------------------------------------------------------------------------------------------
// Generators

const HOSTILE_STRINGS = [
  "' OR '1'='1",
  '1; DROP TABLE intents;--',
  "'); DELETE FROM ledger_transfers; --",
  '../../../../etc/passwd',
  '..\\..\\windows\\win.ini',
  '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
  '%00',
  '\u0000',
  '\u202e\u0645\u0631\u062d\u0628\u0627',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🙂 ภาษาไทย',
  '__proto__',
  'constructor',
  'prototype',
  'user.1.THB\nsystem.equity.THB',
  'system.equity.THB',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template-injection probe, sent as the literal text
  '${7*7}{{7*7}}',
  '<script>alert(1)</script>',
  'x'.repeat(LONG_SEGMENT_CHARS),
  '',
  ' ',
] as const;

/**
 * Text no column can hold (docs/SECURITY.md §6): lone surrogates, high and low, and NUL. Only a
 * JSON body can carry a lone surrogate (URLs are UTF-8), so these stay out of paths and queries.
 */
const UNSTORABLE_STRINGS = ['\ud800', '\udfff', 'a\udc00b', 'ends in half a pair \ud83d', '\u0000x', 'k\u0000'] as const;
/** Past the service's limit of 32 levels, far below the body limit. */
const DEEP_OBJECT_LEVELS = 40;
const nested = (levels: number, wrap: (inner: unknown) => unknown): unknown =>
  Array.from({ length: levels }).reduce<unknown>((inner) => wrap(inner), 'deep');
const DEEP_RECORD: Record<string, unknown> = { a: nested(DEEP_OBJECT_LEVELS - 1, (inner) => ({ a: inner })) };
const DEEP_VALUES = [DEEP_RECORD, nested(DEEP_OBJECT_LEVELS, (inner) => [inner])] as const;
/** Numbers int4, int8 and numeric columns cannot hold, and spellings a coercing parser might take. */
const OUT_OF_RANGE_NUMBERS = [
  '2147483648',
  '9223372036854775807',
  '9223372036854775808',
  '-9223372036854775809',
  '99999999999999999999',
  '1e400',
  '-1e400',
  'NaN',
  'Infinity',
  '+1',
  '0x10',
] as const;
/** Instants RFC 3339 allows that JavaScript or PostgreSQL cannot hold, and the edges of the range. */
const HOSTILE_DATES = [
  '0000-01-01T00:00:00Z',
  '0001-01-01T00:00:00+01:00',
  '2016-12-31T23:59:60Z',
  '9999-12-31T23:59:59Z',
  '9999-12-31T23:59:60Z',
  '2024-02-30T00:00:00Z',
] as const;
/** base64url of crafted `microseconds.uuid` texts, and garbage: a listing must take only the cursors it issued. */
const cursorValue: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.constantFrom(...OUT_OF_RANGE_NUMBERS, '9999999999999999999', '-1', '0', '00001', String(Date.now() * 1000), '1'.repeat(40)),
        fc.oneof(
          { weight: 4, arbitrary: fc.uuid() },
          { weight: 1, arbitrary: fc.constantFrom('', 'x', "'; DROP TABLE intents;--", '00000000-0000-0000-0000-00000000000g') },
        ),
      )
      .map(([micros, id]) => Buffer.from(`${micros}.${id}`).toString('base64url')),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((text) => Buffer.from(text).toString('base64url')) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '====',
      'AAAA',
      '!!!!',
      `${Buffer.from(`${Date.now() * 1000}.${randomUUID()}`).toString('base64url')}==`,
      'a'.repeat(200),
    ),
  },
);

const hostileScalar: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(...HOSTILE_STRINGS),
  fc.constantFrom<unknown>(...UNSTORABLE_STRINGS),
  fc.constantFrom<unknown>(0, -1, 1.5, -0, 2 ** 53, 2 ** 63, 1e308, Number.MAX_SAFE_INTEGER + 2, true, false, null),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.integer(),
  fc.double({ noNaN: true }),
);
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileScalar },
  { weight: 1, arbitrary: fc.array(hostileScalar, { maxLength: 3 }) },
  {
    weight: 1,
    arbitrary: fc.dictionary(
      fc.constantFrom('__proto__', 'constructor', 'a', 'toString', 'valueOf', ...UNSTORABLE_STRINGS),
      hostileScalar,
      { maxKeys: 3 },
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(...DEEP_VALUES) },
);

function schemaValue(schema: JsonSchema, depth: number): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum !== undefined && schema.enum.length > 0) return fc.constantFrom(...schema.enum);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives !== undefined && alternatives.length > 0) return fc.oneof(...alternatives.map((s) => schemaValue(s, depth)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      if (schema.format === 'uuid' || schema.pattern?.includes('4[0-9a-fA-F]{3}') === true) return fc.uuid({ version: 4 });
      if (schema.format === 'date-time')
        return fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4e12) }).map((d) => d.toISOString());
      return fc.string({ maxLength: Math.min(schema.maxLength ?? 30, 60) });
    case 'integer':
      return fc.integer({ min: Math.max(schema.minimum ?? -5, -1e6), max: Math.min(schema.maximum ?? 1e6, 1e9) });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return depth >= NESTING_DEPTH_MAX ? fc.constant([]) : fc.array(fuzzed(schema.items ?? {}, depth + 1), { maxLength: 3 });
    case 'object':
      return depth >= NESTING_DEPTH_MAX ? fc.constant({}) : objectValue(schema, depth);
    default:
      return hostileValue;
  }
}

function objectValue(schema: JsonSchema, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const props = Object.entries(schema.properties ?? {});
  // A free-form object (metadata, a policy condition) is where deep nesting gets furthest.
  if (props.length === 0)
    return fc.oneof(
      { weight: 4, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), hostileScalar, { maxKeys: 3 }) },
      { weight: 1, arbitrary: fc.constant(DEEP_RECORD) },
    );
  const required = new Set(schema.required ?? []);
  // A required field is still left out now and then, and an unknown one added: both must be refused cleanly.
  return fc
    .tuple(
      fc.record(Object.fromEntries(props.map(([name, sub]) => [name, fuzzed(sub, depth + 1)])), {
        requiredKeys: props.filter(([name]) => required.has(name)).map(([name]) => name),
      }),
      fc.option(
        fc.string({ minLength: 1, maxLength: 3 }).map((s) => `unknown_${s}`),
        { freq: 8 },
      ),
      fc.option(fc.constantFrom(...props.map(([name]) => name)), { freq: 10 }),
    )
    .map(([record, unknown, dropped]) => {
      const copy: Record<string, unknown> = { ...record };
      if (unknown !== null) copy[unknown] = 1;
      if (dropped !== null) delete copy[dropped];
      return copy;
    });
}

/** Mostly a value the schema accepts, sometimes a hostile one in its place. */
function fuzzed(schema: JsonSchema, depth: number): fc.Arbitrary<unknown> {
  return fc.oneof({ weight: 6, arbitrary: schemaValue(schema, depth) }, { weight: 1, arbitrary: hostileValue });
}

interface Fixtures {
  readonly intentIds: readonly string[];
  /** Intents whose live stream would stay open (not final): never streamed. */
  readonly openIntentIds: ReadonlySet<string>;
}

function paramValue(route: Route, name: string, fx: Fixtures): fc.Arbitrary<string> {
  const hostile = fc.constantFrom(...HOSTILE_STRINGS.filter((s) => s !== ''));
  const known: string[] = [];
  if (name === 'id' && route.pattern.includes('/intents/')) {
    const streaming = route.pattern.endsWith('/stream');
    known.push(...fx.intentIds.filter((id) => !(streaming && fx.openIntentIds.has(id))));
    // The URN form RFC 4122 allows and PostgreSQL's uuid does not read.
    known.push(...fx.intentIds.map((id) => `urn:uuid:${id}`));
  } else if (name === 'id') {
    known.push('1', '2', '3', '0', '-1', '1.5', '1e3', ...OUT_OF_RANGE_NUMBERS);
  } else if (name === 'serviceId') {
    // Changing the keys this run signs with would only narrow what it reaches.
    known.push('fuzz-svc', 'fuzz-svc-2');
  } else if (name === 'name') {
    known.push(`user.${USERS[0]}.THB`, MERCHANT_ACCOUNT, 'system.revenue.THB', ledgerAccountId(`user.${USERS[1]}.THB`), 'user.999999.THB');
  }
  return fc.oneof(
    { weight: 4, arbitrary: known.length > 0 ? fc.constantFrom(...known) : fc.uuid() },
    { weight: 1, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: hostile },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }) },
  );
}

/** Percent-encoded as a client would, or sent raw (an invalid or double encoding the router must survive). */
const encodeSegment = (value: string, raw: boolean) =>
  raw ? value.replaceAll('?', '%3F').replaceAll('#', '%23') : encodeURIComponent(value);

/** `message-…`: an HTTP Message Signature, correct or mangled; the others use X-Signature. */
type Signing =
  | 'wallet-api'
  | 'admin-tool'
  | 'admin-panel'
  | 'nfc-terminal'
  | 'exchange'
  | 'bearer'
  | 'message-wallet-api'
  | 'message-admin-tool'
  | 'unsigned'
  | 'wrong-secret'
  | 'stale'
  | 'other-path'
  | 'message-other-user'
  | 'message-other-body'
  | 'message-stale';
const signing: fc.Arbitrary<Signing> = fc.oneof(
  { weight: 6, arbitrary: fc.constant('wallet-api' as const) },
  { weight: 3, arbitrary: fc.constant('admin-tool' as const) },
  { weight: 2, arbitrary: fc.constant('message-wallet-api' as const) },
  { weight: 1, arbitrary: fc.constant('message-admin-tool' as const) },
  { weight: 1, arbitrary: fc.constantFrom('admin-panel' as const, 'nfc-terminal' as const, 'exchange' as const) },
  { weight: 2, arbitrary: fc.constant('bearer' as const) },
  { weight: 2, arbitrary: fc.constantFrom('unsigned' as const, 'wrong-secret' as const, 'stale' as const, 'other-path' as const) },
  { weight: 1, arbitrary: fc.constantFrom('message-other-user' as const, 'message-other-body' as const, 'message-stale' as const) },
);

const userIdHeader: fc.Arbitrary<string | string[] | undefined> = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...USERS.map(String), String(MERCHANT)) },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constant('0') },
  {
    weight: 2,
    arbitrary: fc.constantFrom<string | string[]>(
      '-1',
      '1e3',
      ' 7201',
      '7201 ',
      '07201',
      '7201.0',
      '0x1C21',
      '99999999999999999999',
      'abc',
      '',
      '٧٢٠١',
      ['7201', '7202'],
      '7201, 7202',
      '1'.repeat(OVERSIZED_HEADER_CHARS),
    ),
  },
);

type BodyForm = 'json' | 'proto' | 'raw';
const rawBodies = [
  '{',
  '{"a":',
  'null',
  '[]',
  '"text"',
  '1e400',
  '{"amount":1e400}',
  `${'['.repeat(DEEP_JSON_LEVELS)}${']'.repeat(DEEP_JSON_LEVELS)}`,
  `{"a":${'{"a":'.repeat(DEEP_JSON_LEVELS)}1${'}'.repeat(DEEP_JSON_LEVELS)}}`,
  '\uFEFF{}',
  '{"x":"\\ud800"}',
  JSON.stringify({ pad: 'x'.repeat(70 * 1024) }),
];

interface Request {
  /** Not enumerable: counterexamples print the route's key, not its schemas. */
  readonly route: Route;
  readonly routeKey: string;
  /**
   * A raw segment with `/`, `\` or dots may resolve to another route (URL parsing turns `\` into
   * `/` and removes `..`): such an answer is judged against every route's table.
   */
  readonly rerouted: boolean;
  readonly url: string;
  readonly body: string;
  readonly signing: Signing;
  readonly userId: string | string[] | undefined;
  readonly contentType: string | undefined;
  readonly extraHeaders: Record<string, string>;
  /** Sent this many times at once: duplicates race each other. */
  readonly copies: number;
}

const queryValue: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: -2, max: 250 }).map(String),
  fc.constantFrom(...HOSTILE_STRINGS),
  fc.uuid(),
  fc.constantFrom('SETTLED', 'P2P_TRANSFER', 'INTERNAL_P2P', 'wallet-api', '2020-01-01T00:00:00Z'),
  fc.constantFrom(...OUT_OF_RANGE_NUMBERS, ...HOSTILE_DATES),
);

/**
 * Mostly a value aimed at the parameter: crafted cursors, numbers and instants out of range, and
 * often valid neighbours, so that a crafted value meets a query that passes everything else.
 */
function queryValueFor(name: string, schema: JsonSchema): fc.Arbitrary<string> {
  let aimed: fc.Arbitrary<string> | null = null;
  if (name === 'cursor') aimed = cursorValue;
  else if (schema.enum !== undefined && schema.enum.length > 0) aimed = fc.constantFrom(...schema.enum.map(String));
  else if (schema.type === 'integer') {
    const valid = fc.integer({ min: schema.minimum ?? 0, max: Math.min(schema.maximum ?? 1e6, 1e6) }).map(String);
    aimed = fc.oneof({ weight: 2, arbitrary: valid }, { weight: 1, arbitrary: fc.constantFrom(...OUT_OF_RANGE_NUMBERS) });
  } else if (schema.format === 'date-time') aimed = fc.constantFrom('2020-01-01T00:00:00Z', new Date().toISOString(), ...HOSTILE_DATES);
  return aimed === null ? queryValue : fc.oneof({ weight: 3, arbitrary: aimed }, { weight: 1, arbitrary: queryValue });
}

function requestOf(route: Route, fx: Fixtures): fc.Arbitrary<Request> {
  const params = fc.tuple(...route.pathParams.map((name) => fc.tuple(paramValue(route, name, fx), fc.boolean())));
  const unknownPair = fc.tuple(fc.string({ minLength: 1, maxLength: 6 }), queryValue);
  const knownPair =
    route.query.length === 0
      ? null
      : fc.constantFrom(...route.query).chain((q) => fc.tuple(fc.constant(q.name), queryValueFor(q.name, q.schema)));
  const query = fc.array(
    knownPair === null ? unknownPair : fc.oneof({ weight: 5, arbitrary: knownPair }, { weight: 1, arbitrary: unknownPair }),
    {
      maxLength: route.query.length > 0 ? 4 : 1,
    },
  );
  const bodyForm: fc.Arbitrary<BodyForm> = fc.oneof(
    { weight: 8, arbitrary: fc.constant('json' as const) },
    { weight: 1, arbitrary: fc.constant('proto' as const) },
    { weight: 1, arbitrary: fc.constant('raw' as const) },
  );
  const bodyValue =
    route.method === 'POST' && route.key === 'POST /intents'
      ? intentBody
      : route.body === null
        ? fc.constant(undefined)
        : fuzzed(route.body, 0);
  return fc
    .record({
      params,
      query,
      bodyValue,
      bodyForm,
      rawBody: fc.constantFrom(...rawBodies),
      signing,
      userId: userIdHeader,
      contentType: fc.oneof(
        { weight: 10, arbitrary: fc.constant(undefined) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            'application/json; charset=utf-8',
            'text/plain',
            'application/x-www-form-urlencoded',
            'application/json, text/plain',
          ),
        },
      ),
      ifMatch: fc.option(fc.constantFrom('0', '1', '-1', 'abc', '99999999999999999999'), { freq: 6 }),
      copies: fc.oneof({ weight: 6, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constant(2) }),
    })
    .map((r) => {
      let path = route.pattern;
      let rerouted = false;
      route.pathParams.forEach((name, index) => {
        const [value, raw] = r.params[index] ?? ['', false];
        if (raw && /[/\\.]/.test(value)) rerouted = true;
        path = path.replace(`{${name}}`, encodeSegment(value, raw));
      });
      const qs = r.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
      const json = r.bodyValue === undefined ? '' : JSON.stringify(r.bodyValue);
      let body = json;
      if (r.bodyForm === 'raw') body = r.rawBody;
      else if (r.bodyForm === 'proto') body = withProtoKeys(json);
      const extraHeaders: Record<string, string> = r.ifMatch === null ? {} : { 'if-match': r.ifMatch };
      const request = {
        routeKey: route.key,
        rerouted,
        url: qs === '' ? path : `${path}?${qs}`,
        body,
        signing: r.signing,
        userId: r.userId,
        contentType: r.contentType,
        extraHeaders,
        copies: r.copies,
      };
      return Object.defineProperty(request, 'route', { value: route, enumerable: false }) as Request;
    });
}

/** Prototype-pollution keys at the top and inside metadata, written into the JSON text (an object literal cannot carry an own `__proto__`). */
function withProtoKeys(json: string): string {
  const evil = '"__proto__":{"polluted":"yes","admin":true},"constructor":{"prototype":{"polluted":"yes"}}';
  if (!json.startsWith('{')) return `{${evil}}`;
  const withMetadata = json.replace('"metadata":{', `"metadata":{${evil},`);
  return json === '{}' ? `{${evil}}` : `{${evil},${withMetadata.slice(1)}`;
}

/** POST /intents deserves the domain-aware generator: real users, real amounts, real metadata blocks. */
const userRef = fc.constantFrom<unknown>(...USERS, MERCHANT, 0, -1, 999_999, '7201', 1.5);
const metadataValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant({}),
  fc.constant(DEEP_RECORD),
  fc.record({
    ipps: fc.record(
      {
        receiverType: fc.constantFrom('MSISDN', 'BANKAC', 'BILLERID', 'NATID', 'EWALLETID', 'BOGUS', 1),
        receiverAccount: fc.constantFrom('0810000001', '0810009999', '0810009998', "'; DROP TABLE x;--", ''),
        receiverBank: fc.option(fc.constantFrom('004', '', 7), { nil: undefined }),
      },
      { requiredKeys: ['receiverType'] },
    ),
  }),
  fc.record({ customerUserId: userRef, merchantId: userRef }, { requiredKeys: [] }),
  fc.record({ recipientUserId: userRef }),
  fc.record({ nfcTagId: fc.constantFrom<unknown>(1, '1', 1.5, null) }),
  fc.record({ tags: fc.array(fc.constantFrom<unknown>('fee_exempt', 'vip', 1, '__proto__'), { maxLength: 3 }) }),
  fc.record(
    {
      appScope: fc.constantFrom<unknown>('w', 'c', 'a', 'z'),
      ttlSeconds: fc.constantFrom<unknown>(1, 600, 3600, 3601, -5, 1e12, '60'),
      note: fc.constantFrom<unknown>('hi', 'x'.repeat(501)),
    },
    { requiredKeys: [] },
  ),
  hostileValue,
);
/** A body each operation type accepts (so that money moves), built from the operation table (docs/rules.md). */
function validIntentBody(operationType: string, payer: number, other: number, amount: number, receiver: string): Record<string, unknown> {
  switch (operationType) {
    case 'P2P_TRANSFER':
      return { operationType, amount, recipientUserId: other };
    case 'PSPX_WITHDRAWAL':
    case 'THAI_QR_PAY':
      return { operationType, amount, metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: receiver } } };
    case 'WITHDRAWAL':
      return { operationType, amount, externalRef: `ref-${payer}-${amount}` };
    case 'QP_TOPUP':
      return { operationType, amount };
    case 'MINIAPP_CHARGE':
      return { operationType, amount, metadata: { customerUserId: payer, merchantId: other } };
    case 'MINIAPP_CREDIT':
      return { operationType, amount, metadata: { customerUserId: other, merchantId: payer } };
    case 'INVOICE_PAYMENT':
      return { operationType, amount, toLedgerAccountId: ledgerAccountId(MERCHANT_ACCOUNT), metadata: { ttlSeconds: 600 } };
    default:
      return { operationType, amount };
  }
}
/** Accounts toLedgerAccountId may not name: only user, merchant and agent wallets receive by ledger id. */
const NOT_WALLET_LEDGER_IDS = [
  'system.transit.INTERNAL_P2P.THB',
  'system.transit.MERCHANT_INVOICE.THB',
  'system.revenue.THB',
  'system.nostro.pspx.THB',
  'system.equity.THB',
  `merchant.${MERCHANT}.settlement.THB`,
  'service.900001.THB',
].map(ledgerAccountId);
const INTENT_FIELDS = [
  'idempotencyKey',
  'operationType',
  'amount',
  'currency',
  'metadata',
  'recipientUserId',
  'toLedgerAccountId',
  'fromAccountName',
  'toAccountName',
  'externalRef',
  'live',
  'comment',
  'fromName',
] as const;
/** Hostile or out-of-rule values per field, to put in place of a valid one. */
const intentFieldValue: Readonly<Record<(typeof INTENT_FIELDS)[number], fc.Arbitrary<unknown>>> = {
  idempotencyKey: fc.constantFrom<unknown>('not-a-uuid', 'a0eebc99-9c0b-1ef8-bb6d-6bb9bd380a11', 1, null),
  operationType: fc.oneof(fc.constantFrom(...OPERATION_TYPES), hostileScalar),
  amount: fc.constantFrom<unknown>(0, -1, 1.5, 2 ** 53, 1e308, '100', null, 9_007_199_254_740_991),
  currency: fc.constantFrom<unknown>('USD', 'thb', 'TH', '€€€', 1),
  metadata: metadataValue,
  recipientUserId: userRef,
  toLedgerAccountId: fc.constantFrom<unknown>(
    ledgerAccountId(MERCHANT_ACCOUNT),
    ledgerAccountId(`user.${USERS[1]}.THB`),
    '00000000-0000-4000-8000-000000000000',
    'x',
    `urn:uuid:${ledgerAccountId(`user.${USERS[1]}.THB`)}`,
    ...NOT_WALLET_LEDGER_IDS,
  ),
  fromAccountName: fc.constantFrom<unknown>(
    ...HOSTILE_STRINGS.slice(0, 16),
    `user.${USERS[2]}.THB`,
    'system.equity.THB',
    `user.${USERS[0]}.THB\nsystem.equity.THB`,
    `xuser.${USERS[0]}.THB`,
    `user.${USERS[0]}.THBx`,
  ),
  toAccountName: fc.constantFrom<unknown>(`user.${USERS[3]}.THB`, MERCHANT_ACCOUNT, 'system.revenue.THB', "merchant.1.THB' OR 1=1--"),
  externalRef: fc.constantFrom<unknown>('ref-1', 'x'.repeat(101), "'; --", 5),
  live: fc.constantFrom<unknown>(true, false, 'yes'),
  comment: fc.constantFrom<unknown>('hi', 'x'.repeat(501), '\u0000', 'ภาษาไทย', ...UNSTORABLE_STRINGS),
  fromName: fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom(...UNSTORABLE_STRINGS)),
};
/** Added to an otherwise valid payment: text no column holds, or nesting past the limit, where the payment would pass without it. */
const unstorableIntentFields: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  fc.constantFrom(...UNSTORABLE_STRINGS).map((comment) => ({ comment })),
  fc.constantFrom(...UNSTORABLE_STRINGS).map((toName) => ({ toName })),
  fc.constantFrom(...UNSTORABLE_STRINGS).map((key) => ({ metadata: { [key]: 1 } })),
  fc.constantFrom(...UNSTORABLE_STRINGS).map((tag) => ({ metadata: { note: [tag] } })),
  fc.constant({ metadata: DEEP_RECORD }),
);
const intentBody: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc
      .record({
        operationType: fc.constantFrom(...OPERATION_TYPES),
        payer: fc.constantFrom(...USERS),
        other: fc.constantFrom(...USERS, MERCHANT),
        amount: fc.integer({ min: 1, max: 50_000 }),
        receiver: fc.constantFrom('0810000001', '0810009999', '0810009998', '0810009997'),
        key: fc.uuid({ version: 4 }),
        mutations: fc.array(fc.tuple(fc.constantFrom(...INTENT_FIELDS), fc.integer({ min: 0, max: 1 })), { maxLength: 2 }),
        live: fc.boolean(),
        unstorable: fc.oneof({ weight: 5, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: unstorableIntentFields }),
      })
      .chain((r) => {
        const base: Record<string, unknown> = {
          idempotencyKey: r.key,
          ...validIntentBody(r.operationType, r.payer, r.other, r.amount, r.receiver),
          ...(r.live ? { live: true } : {}),
          ...r.unstorable,
        };
        // Half the mutations drop a field, half replace it with one of its hostile values.
        const replaced = r.mutations.filter(([, drop]) => drop === 0).map(([field]) => field);
        for (const [field, drop] of r.mutations) if (drop === 1) delete base[field];
        if (replaced.length === 0) return fc.constant(base);
        return fc.tuple(...replaced.map((field) => intentFieldValue[field])).map((values) => {
          const copy = { ...base };
          replaced.forEach((field, index) => {
            copy[field] = values[index];
          });
          return copy;
        });
      }),
  },
  { weight: 1, arbitrary: hostileValue },
);

// ---------------------------------------------------------------------------------------------
// Sending and judging

let t: TestApp;
let routes: Route[];
let fixtures: Fixtures;
let anyRouteAllows: Set<string>;
const seen = new Map<string, Map<string, number>>();

function headersFor(request: Request): Record<string, string | string[]> {
  const { method } = request.route;
  const headers: Record<string, string | string[]> = { ...request.extraHeaders };
  const secretOf = (service: string) => t.secrets.get(service)?.[0] ?? 'none';
  switch (request.signing) {
    case 'bearer':
      headers.authorization = `Bearer ${ADMIN_TOKEN}`;
      break;
    case 'unsigned':
      break;
    case 'wrong-secret':
      Object.assign(headers, signedHeaders('wallet-api', 'not-the-secret', method, request.url, request.body));
      break;
    case 'stale':
      Object.assign(
        headers,
        signedHeaders('wallet-api', secretOf('wallet-api'), method, request.url, request.body, {
          nowS: Math.floor(Date.now() / 1000) - 3600,
        }),
      );
      break;
    case 'other-path':
      // A signature captured from another path, replayed here.
      Object.assign(
        headers,
        signedHeaders(
          'wallet-api',
          secretOf('wallet-api'),
          method,
          request.url === '/intents' ? '/intents/quote' : '/intents',
          request.body,
        ),
      );
      break;
    case 'message-wallet-api':
    case 'message-admin-tool': {
      const service = request.signing === 'message-wallet-api' ? 'wallet-api' : 'admin-tool';
      Object.assign(
        headers,
        messageSignedHeaders(service, secretOf(service), method, request.url, request.body, signedUser(request.userId)),
      );
      break;
    }
    case 'message-other-user':
      // Captured for one user, sent for another (or for none: the covered header is then missing).
      Object.assign(
        headers,
        messageSignedHeaders('wallet-api', secretOf('wallet-api'), method, request.url, request.body, {
          userId: `${signedUser(request.userId).userId ?? ''}0`,
        }),
      );
      if (request.userId === undefined) delete headers['x-user-id'];
      break;
    case 'message-other-body':
      Object.assign(
        headers,
        messageSignedHeaders('wallet-api', secretOf('wallet-api'), method, request.url, `${request.body} `, signedUser(request.userId)),
      );
      break;
    case 'message-stale':
      Object.assign(
        headers,
        messageSignedHeaders('wallet-api', secretOf('wallet-api'), method, request.url, request.body, {
          ...signedUser(request.userId),
          nowS: Math.floor(Date.now() / 1000) - 3600,
        }),
      );
      break;
    default:
      Object.assign(headers, signedHeaders(request.signing, secretOf(request.signing), method, request.url, request.body));
  }
  if (request.userId !== undefined) headers['x-user-id'] = request.userId;
  if (request.body !== '') headers['content-type'] = request.contentType ?? 'application/json';
  return headers;
}

const properlySigned = (s: Signing) =>
  !['unsigned', 'wrong-secret', 'stale', 'other-path', 'message-other-user', 'message-other-body', 'message-stale'].includes(s);

/** The X-User-Id a message signature covers: repeated values as the server joins them. */
const signedUser = (userId: string | string[] | undefined): { userId?: string } =>
  userId === undefined ? {} : { userId: Array.isArray(userId) ? userId.join(', ') : userId };

/** Weighted toward the routes that move money, and the listings whose cursors are crafted; every route is drawn. */
function weightOf(route: Route): number {
  if (route.key === 'POST /intents') return 25;
  if (route.key.startsWith('POST /intents') || route.query.some((q) => q.name === 'cursor')) return 6;
  return 2;
}

/**
 * What no route may accept, whatever its table says (docs/SECURITY.md §6), written apart from the
 * service's own check: a lone surrogate or NUL in any text or key, a number JSON cannot write
 * back, or an object or array more than 32 levels below the body.
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
function unstorable(value: unknown, level: number): boolean {
  if (typeof value === 'string') return LONE_SURROGATE.test(value) || value.includes('\u0000');
  if (typeof value === 'number') return !Number.isFinite(value);
  if (typeof value !== 'object' || value === null) return false;
  if (level > 32) return true;
  return Object.entries(value).some(([key, item]) => unstorable(key, level) || unstorable(item, level + 1));
}

function parsedBody(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

function judgeAccepted(request: Request, where: string): void {
  const body = parsedBody(request.body);
  if (request.route.body !== null) expect(unstorable(body, 0), `${where}: accepted input the service must refuse`).toBe(false);
  if (
    request.route.key === 'POST /intents' &&
    typeof body === 'object' &&
    body !== null &&
    !('toAccountName' in body) &&
    'toLedgerAccountId' in body
  ) {
    expect(NOT_WALLET_LEDGER_IDS, `${where}: toLedgerAccountId named an account that is not a wallet`).not.toContain(
      body.toLedgerAccountId,
    );
  }
}

function judge(request: Request, res: LightMyRequestResponse): void {
  const { route } = request;
  const where = `${route.method} ${request.url.slice(0, 200)} [${request.signing}] body=${request.body.slice(0, 300)}`;
  let body: Record<string, unknown> = {};
  const json = String(res.headers['content-type'] ?? '').includes('application/json');
  // Pages, metrics and event streams answer other types on success; every error is JSON.
  if (json || res.statusCode >= 400) {
    try {
      body = res.body === '' ? {} : (JSON.parse(res.body) as Record<string, unknown>);
    } catch {
      throw new Error(`${where}: answer ${res.statusCode} is not JSON: ${res.body.slice(0, 300)}`);
    }
  }
  const code = typeof body.error === 'string' ? body.error : null;
  const label = res.statusCode < 400 || code === null ? String(res.statusCode) : `${res.statusCode} ${code}`;
  const counts = seen.get(route.key) ?? new Map<string, number>();
  counts.set(label, (counts.get(label) ?? 0) + 1);
  seen.set(route.key, counts);

  if (res.statusCode >= 400 && route.key !== 'GET /health') {
    expect(code, `${where}: error body without a code: ${res.body.slice(0, 300)}`).not.toBeNull();
    expect(Object.hasOwn(ERROR_STATUS, code ?? ''), `${where}: ${label} is not a catalogue code`).toBe(true);
    // The one sanctioned exception to the catalogue's status: schema errors of confirm and cancel headers are 400 (docs/rules.md R6, R29).
    if (label !== '400 VALIDATION_ERROR')
      expect(ERROR_STATUS[code as ErrorCode], `${where}: ${label} has another status in the catalogue`).toBe(res.statusCode);
  }
  const table = request.rerouted ? anyRouteAllows : route.allowed;
  const allowed = table.has(label) || table.has(String(res.statusCode));
  expect(allowed, `${where}: answered ${label}, not documented for ${route.key}: ${res.body.slice(0, 300)}`).toBe(true);
  if (res.statusCode < 400 && !request.rerouted) judgeAccepted(request, where);
  if (!properlySigned(request.signing) && !route.isPublic && !request.rerouted) {
    expect(res.statusCode, `${where}: an unsigned or badly signed request got through`).toBeGreaterThanOrEqual(400);
  }
}

async function send(request: Request): Promise<void> {
  const headers = headersFor(request);
  const one = () =>
    t.app.inject({
      method: request.route.method as HTTPMethods,
      url: request.url,
      headers,
      ...(request.body === '' ? {} : { payload: request.body }),
    });
  const answers = await Promise.all(Array.from({ length: request.copies }, one));
  for (const res of answers) judge(request, res);
}

async function setUpFixtures(): Promise<Fixtures> {
  for (const user of USERS) await createUser(t, user);
  await createMerchant(t, MERCHANT);
  for (const user of USERS) await topUp(t, user, 5_000_000);
  await registerIpps(t, USERS[0]);
  const payoutId = await payout(t, USERS[0], '0810000001', 1_000);
  const invoice = await t.call('POST', '/intents', {
    user: MERCHANT,
    body: {
      idempotencyKey: randomUUID(),
      operationType: 'INVOICE_PAYMENT',
      amount: 2_000,
      toLedgerAccountId: ledgerAccountId(MERCHANT_ACCOUNT),
    },
  });
  expect(invoice.statusCode, invoice.body).toBe(201);
  const settled = await t.call('POST', '/intents', {
    user: USERS[1],
    body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: USERS[2] },
  });
  expect(settled.statusCode, settled.body).toBe(201);
  const foreign = await t.call('POST', '/intents', {
    service: 'exchange',
    user: 900_001,
    body: { idempotencyKey: randomUUID(), operationType: 'SERVICE_DEPOSIT', amount: 1, metadata: { recipientUserId: USERS[3] } },
  });
  const invoiceId = invoice.json().intentId as string;
  const ids = [payoutId, invoiceId, settled.json().intentId as string];
  // The exchange's service account starts empty: its deposit is refused, which is a foreign id all the same when it exists.
  if (foreign.statusCode === 201) ids.push(foreign.json().intentId as string);
  return { intentIds: ids, openIntentIds: new Set([payoutId, invoiceId]) };
}

beforeAll(async () => {
  t = await startTestApp();
  fixtures = await setUpFixtures();
  routes = routesOf(t.app.swagger() as unknown as OpenApiDocument);
  anyRouteAllows = new Set(routes.flatMap((route) => [...route.allowed]));
}, 120_000);
afterAll(async () => t?.close());

describe('fuzzing the HTTP surface', () => {
  it('every route answers only documented statuses and codes, never an undocumented 5xx; the audit stays clean', async () => {
    expect(routes.length).toBeGreaterThan(30);
    // Weighted toward the routes that move money; every route is drawn.
    const request = fc.oneof(...routes.map((route) => ({ weight: weightOf(route), arbitrary: requestOf(route, fixtures) })));
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        sent += r.copies;
        await send(r);
      }),
      { numRuns: FUZZ_RUNS_MAX, interruptAfterTimeLimit: FUZZ_TIME_LIMIT_MS, markInterruptAsFailure: false },
    );

    const summary = [...seen].map(([key, counts]) => `${key}: ${[...counts].map(([label, n]) => `${label}×${n}`).join(', ')}`);
    console.info(`fuzz: ${sent} requests over ${seen.size} of ${routes.length} routes\n${summary.join('\n')}`);
    expect(sent).toBeGreaterThan(200);

    // Nothing leaked into the prototype chain of plain objects.
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).admin).toBeUndefined();

    const audit = await runAudit(t.db);
    expect(audit.violations.map(formatViolation)).toEqual([]);
    expect(audit.ok).toBe(true);
    const health = await t.app.inject({ method: 'GET', url: '/health' });
    expect(health.statusCode).toBe(200);
    // The service still does its job after the storm.
    const after = await t.call('POST', '/intents', {
      user: USERS[3],
      body: { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: 100 },
    });
    expect(after.statusCode, after.body).toBe(201);
  }, 120_000);
});
