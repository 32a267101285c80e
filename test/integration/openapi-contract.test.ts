import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiError, ERROR_STATUS } from '../../src/domain/errors.js';
import { registerErrorHandling } from '../../src/http/plugins/errors.js';
import { registerOpenApi } from '../../src/http/plugins/openapi.js';
import { responses } from '../../src/http/schemas/shared.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { listedErrorCodes, type OpenApiDocument, recordErrorAnswers } from '../support/error-contract.js';

/** docs/design.md, The OpenAPI document: what a generated client needs from it (R53). */

interface Operation {
  operationId?: string;
  summary?: string;
  tags?: string[];
  security?: Array<Record<string, string[]>>;
  parameters?: Array<{ in: string; name: string; required?: boolean }>;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

interface Document {
  servers?: Array<{ url: string }>;
  security: Array<Record<string, string[]>>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, { type: string; in?: string; name?: string }> };
}

let t: TestApp;
let doc: Document;
beforeAll(async () => {
  t = await startTestApp();
  doc = JSON.parse(JSON.stringify(t.app.swagger())) as Document;
});
afterAll(async () => t?.close());

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, byMethod]) =>
    Object.entries(byMethod).map(([method, operation]) => ({ route: `${method.toUpperCase()} ${path}`, operation })),
  );

/** Every schema object in `node`, with the JSON pointer to it. */
function* schemasIn(node: unknown, pointer = '#'): Generator<[string, Record<string, unknown>]> {
  if (typeof node !== 'object' || node === null) return;
  if (!Array.isArray(node)) yield [pointer, node as Record<string, unknown>];
  for (const [key, value] of Object.entries(node)) yield* schemasIn(value, `${pointer}/${key}`);
}

describe('operations', () => {
  it('each has a unique camelCase operationId, a summary and tags', () => {
    const ids = operations().map(({ operation }) => operation.operationId);
    expect(ids.length).toBeGreaterThan(40);
    for (const { route, operation } of operations()) {
      expect(operation.operationId, route).toMatch(/^[a-z][a-zA-Z0-9]*$/);
      expect(operation.summary, route).toEqual(expect.any(String));
      expect(operation.tags?.length, route).toBeGreaterThan(0);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('every 4xx and 5xx answer refs Error and lists codes of the catalogue at that status', () => {
    let checked = 0;
    for (const { route, operation } of operations()) {
      for (const status of Object.keys(operation.responses)) {
        // The health probe's 503 is its own body, {status: 'ko', message}, as the interface specifies.
        if (Number(status) < 400 || route === 'GET /health') continue;
        const codes = listedErrorCodes(operation as OpenApiDocument['paths'][string][string], Number(status));
        expect(codes, `${route} ${status} refs Error`).not.toBeNull();
        expect(codes?.length, `${route} ${status} lists its codes`).toBeGreaterThan(0);
        for (const code of codes ?? []) {
          expect(Object.hasOwn(ERROR_STATUS, code), `${route} ${status} ${code} is in the catalogue`).toBe(true);
          // The one pairing outside the catalogue: confirm and cancel answer a bad header or body with 400.
          const status400 = code === 'VALIDATION_ERROR' && Number(status) === 400;
          if (!status400) expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], `${route} ${code}`).toBe(Number(status));
          checked += 1;
        }
      }
    }
    expect(checked).toBeGreaterThan(200);
  });

  it('a signed route lists authentication and rate limiting; a route with a body, its size and media type', () => {
    const create = doc.paths['/intents']?.post;
    expect(listedErrorCodes(create as never, 401)).toEqual(['UNAUTHORIZED']);
    expect(listedErrorCodes(create as never, 429)).toEqual(['RATE_LIMITED']);
    expect(listedErrorCodes(create as never, 413)).toEqual(['PAYLOAD_TOO_LARGE']);
    expect(listedErrorCodes(create as never, 422)).toEqual(
      expect.arrayContaining(['VALIDATION_ERROR', 'INSUFFICIENT_FUNDS', 'LIMIT_EXCEEDED']),
    );
    // Confirm answers a schema error with 400 (docs/rules.md R6), and says so.
    expect(listedErrorCodes(doc.paths['/intents/{id}/confirm']?.post as never, 400)).toContain('VALIDATION_ERROR');
    expect(listedErrorCodes(doc.paths['/intents/{id}/confirm']?.post as never, 422)).not.toContain('VALIDATION_ERROR');
    // The public console page answers no 401.
    expect(doc.paths['/console']?.get?.responses['401']).toBeUndefined();
  });
});

describe('shared shapes', () => {
  it('live once under components.schemas and are used by $ref', () => {
    const { schemas } = doc.components;
    for (const name of ['Error', 'Intent', 'IntentStatus', 'OperationType', 'Account']) expect(schemas[name], name).toBeDefined();
    const text = JSON.stringify(doc.paths);
    expect(text).toContain('"$ref":"#/components/schemas/Intent"');
    expect(text).toContain('"$ref":"#/components/schemas/Error"');
    expect(text).toContain('"$ref":"#/components/schemas/Account"');
    expect(JSON.stringify(schemas.Intent)).toContain('"status":{"$ref":"#/components/schemas/IntentStatus"}');
    expect(JSON.stringify(schemas.Intent)).toContain('"operationType":{"$ref":"#/components/schemas/OperationType"}');
    // An inline copy of the Intent shape would carry its property list.
    expect(text).not.toContain('"required":["intentId","status","operationType"');
  });

  it('every *At field is a date-time and no status is a bare string', () => {
    const atFields: string[] = [];
    for (const [pointer, schema] of schemasIn(doc)) {
      const properties = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
      for (const [name, property] of Object.entries(properties)) {
        if (name.endsWith('At')) {
          atFields.push(`${pointer}/${name}`);
          const variants = (property.anyOf as Array<Record<string, unknown>> | undefined) ?? [property];
          expect(
            variants.some((variant) => variant.format === 'date-time'),
            `${pointer}/${name}`,
          ).toBe(true);
        }
        if (name === 'status') expect(property.type === 'string' && property.enum === undefined, `${pointer}/status`).toBe(false);
      }
    }
    expect(atFields.length).toBeGreaterThan(20);
  });
});

describe('signing', () => {
  it('documents both schemes with every header they need, X-User-Id where it is required, and a server', () => {
    const headerOf = (scheme: string) => doc.components.securitySchemes[scheme]?.name;
    const requirements = doc.security.map((requirement) => Object.keys(requirement).map(headerOf).sort());
    expect(requirements).toEqual([
      ['Signature', 'Signature-Input'],
      ['X-Service-Id', 'X-Signature', 'X-Timestamp'],
    ]);
    const userId = doc.paths['/intents']?.post?.parameters?.find((parameter) => parameter.name === 'X-User-Id');
    expect(userId).toMatchObject({ in: 'header', required: true });
    expect(doc.paths['/admin/fee-rules']?.get?.security?.some((requirement) => 'adminToken' in requirement)).toBe(true);
    expect(doc.paths['/health']?.get?.security).toEqual([]);
    expect(doc.servers?.length).toBeGreaterThan(0);
  });
});

describe('the error check of the test apps (test/support/error-contract.ts)', () => {
  it('names an error a route answers without listing it', async () => {
    const app = Fastify();
    registerErrorHandling(app, false);
    await registerOpenApi(app, '0.0.0');
    app.get(
      '/probe',
      {
        config: { auth: 'none' },
        schema: { operationId: 'probe', summary: 'probe', response: responses({ 200: { type: 'object' } }, ['NOT_FOUND']) },
      },
      async (request) => {
        throw (request.query as { conflict?: string }).conflict === undefined ? apiError('NOT_FOUND', 'no') : apiError('CONFLICT', 'no');
      },
    );
    const answers = recordErrorAnswers(app);
    await app.ready();
    try {
      expect((await app.inject({ method: 'GET', url: '/probe' })).statusCode).toBe(404);
      expect(answers.undocumented()).toEqual([]);
      expect((await app.inject({ method: 'GET', url: '/probe?conflict=1' })).statusCode).toBe(409);
      expect(answers.undocumented()).toEqual(['get /probe 409 CONFLICT']);
    } finally {
      await app.close();
    }
  });
});
