import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/database.js';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../../src/config.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { createTestSchema, testPoolMode } from '../support/database.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { buildIfStale, type ServiceProcess, spawnService } from '../support/service-process.js';

/**
 * `payorch serve` as a real process with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP
 * receiver in this test (http/json, the protocol a test can read without protobuf): one signed
 * P2P payment sent with a W3C traceparent must come back as one trace, continuing the caller's,
 * with the request's server span, its database statements and the ledger call naming the intent.
 * PostgreSQL statements are traced by pg's instrumentation, PGlite's by payorch itself.
 */

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const secret = secretsOf(readConfigFile(DEMO_CONFIG_FILE)).get('wallet-api')?.[0] ?? '';
const STARTUP_MS_MAX = 60_000;
const EXPORT_MS_MAX = 10_000;
const PAYER = 8801;
const PAYEE = 8802;
const SERVER_SPAN_KIND = 2;

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  arrayValue?: { values: OtlpValue[] };
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: OtlpValue }>;
}
interface OtlpExport {
  resourceSpans?: Array<{ resource?: { attributes?: OtlpSpan['attributes'] }; scopeSpans?: Array<{ spans?: OtlpSpan[] }> }>;
}

const spans: OtlpSpan[] = [];
const serviceNames = new Set<string>();
let receiver: Server;
let service: ServiceProcess;
let databaseUrl: string | undefined;
let dataDir = '';
let dropDatabase: () => Promise<void>;

function attribute(span: OtlpSpan, key: string): string | string[] | undefined {
  const value = span.attributes?.find((entry) => entry.key === key)?.value;
  if (value === undefined) return undefined;
  if (value.arrayValue !== undefined) return value.arrayValue.values.map((item) => item.stringValue ?? '');
  return value.stringValue ?? (value.intValue === undefined ? undefined : String(value.intValue));
}

async function startReceiver(): Promise<string> {
  receiver = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      if (request.url === '/v1/traces') {
        const exported = JSON.parse(body) as OtlpExport;
        for (const resource of exported.resourceSpans ?? []) {
          for (const entry of resource.resource?.attributes ?? []) {
            if (entry.key === 'service.name' && entry.value.stringValue !== undefined) serviceNames.add(entry.value.stringValue);
          }
          for (const scope of resource.scopeSpans ?? []) spans.push(...(scope.spans ?? []));
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
}

/** A schema of its own on PostgreSQL; a PGlite directory otherwise, read again after the process ends. */
async function prepareDatabase(): Promise<void> {
  if (pgUrl === undefined) {
    dataDir = await mkdtemp(join(tmpdir(), 'payorch-tracing-'));
    dropDatabase = () => rm(dataDir, { recursive: true, force: true });
    return;
  }
  const schema = await createTestSchema(pgUrl, 'tracing');
  databaseUrl = schema.url;
  dropDatabase = schema.drop;
}

async function call(path: string, body: unknown, userId: number, extra: Record<string, string> = {}) {
  const raw = JSON.stringify(body);
  const headers = { ...signedHeaders('wallet-api', secret, 'POST', path, raw, { userId }), 'content-type': 'application/json', ...extra };
  const response = await fetch(`${service.url}${path}`, { method: 'POST', headers, body: raw });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function spansOf(traceId: string, enough: (found: OtlpSpan[]) => boolean): Promise<OtlpSpan[]> {
  const deadline = Date.now() + EXPORT_MS_MAX;
  for (;;) {
    const found = spans.filter((span) => span.traceId === traceId);
    if (enough(found) || Date.now() > deadline) return found;
    await sleep(50);
  }
}

beforeAll(async () => {
  await buildIfStale();
  const endpoint = await startReceiver();
  await prepareDatabase();
  service = await spawnService(
    {
      ...(databaseUrl === undefined ? { DATA_DIR: dataDir, DATABASE_URL: '' } : { DATABASE_URL: databaseUrl }),
      REDIS_URL: '',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    },
    STARTUP_MS_MAX,
  );
  for (const user of [PAYER, PAYEE]) expect((await call('/accounts', { userId: user, currency: 'THB' }, user)).status).toBe(201);
  const topUp = await call('/intents', { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: 10_000 }, PAYER);
  expect(topUp.status).toBe(201);
}, 120_000);

afterAll(async () => {
  service?.child.kill('SIGTERM');
  await service?.exited;
  await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  await dropDatabase?.();
});

describe(`tracing with OTEL_EXPORTER_OTLP_ENDPOINT set (${pgUrl === undefined ? 'PGlite' : 'PostgreSQL'})`, () => {
  it("exports a P2P payment as one trace under the caller's traceparent: server span, statements, ledger call with the intent id", async () => {
    const traceId = randomBytes(16).toString('hex');
    const parentSpanId = randomBytes(8).toString('hex');
    const payment = await call(
      '/intents',
      { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 250, recipientUserId: PAYEE },
      PAYER,
      { traceparent: `00-${traceId}-${parentSpanId}-01` },
    );
    expect(payment.status, JSON.stringify(payment.body)).toBe(201);
    const intentId = payment.body.intentId as string;

    const isLedger = (span: OtlpSpan) => span.name === 'ledger create_transfers';
    const trace = await spansOf(traceId, (found) => found.some((span) => span.kind === SERVER_SPAN_KIND) && found.some(isLedger));

    const server = trace.filter((span) => span.kind === SERVER_SPAN_KIND);
    expect(server.map((span) => span.name)).toEqual(['POST /intents']);
    expect(server[0]?.parentSpanId).toBe(parentSpanId);
    expect(attribute(server[0]!, 'http.route')).toBe('/intents');

    const statements = trace.filter(
      (span) => attribute(span, 'db.system.name') === 'postgresql' || attribute(span, 'db.system') === 'postgresql',
    );
    expect(statements.length).toBeGreaterThan(0);
    // Statement texts only: the values (amounts, user ids, secrets) are never span attributes.
    for (const span of statements) expect(JSON.stringify(span.attributes)).not.toContain(secret);

    const ledger = trace.filter(isLedger);
    expect(ledger.length).toBeGreaterThan(0);
    expect(ledger.some((span) => [attribute(span, 'payorch.intent_id')].flat().includes(intentId))).toBe(true);
    expect(serviceNames).toContain('payorch');

    // The request's log lines carry the same trace id, so a log search leads to this trace.
    const logged = service.logs.filter((line) => line.includes(intentId) || line.includes(traceId));
    expect(logged.some((line) => (JSON.parse(line) as { trace_id?: string }).trace_id === traceId)).toBe(true);
  });

  it('starts a trace of its own for a malformed or all-zero traceparent, and answers the request as usual', async () => {
    for (const traceparent of [
      '00-not-a-trace-id-01',
      `00-${'0'.repeat(32)}-${randomBytes(8).toString('hex')}-01`,
      `ff-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`,
    ]) {
      const payment = await call(
        '/intents',
        { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 10, recipientUserId: PAYEE },
        PAYER,
        { traceparent },
      );
      expect(payment.status, traceparent).toBe(201);
      const intentId = payment.body.intentId as string;
      const deadline = Date.now() + EXPORT_MS_MAX;
      const ledgerOf = () =>
        spans.find((span) => span.name === 'ledger create_transfers' && [attribute(span, 'payorch.intent_id')].flat().includes(intentId));
      while (ledgerOf() === undefined && Date.now() < deadline) await sleep(50);
      const ledger = ledgerOf();
      expect(ledger, traceparent).toBeDefined();
      const trace = await spansOf(ledger?.traceId ?? '', (found) => found.some((span) => span.kind === SERVER_SPAN_KIND));
      const server = trace.find((span) => span.kind === SERVER_SPAN_KIND);
      expect(server?.name).toBe('POST /intents');
      expect(server?.parentSpanId ?? '', traceparent).toBe('');
    }
  });

  it('does not trace probes and metrics scrapes', async () => {
    const before = spans.length;
    expect((await fetch(`${service.url}/metrics`)).status).toBe(200);
    const traceId = randomBytes(16).toString('hex');
    await fetch(`${service.url}/health`, { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } });
    await sleep(500);
    expect(spans.slice(before).filter((span) => span.traceId === traceId)).toEqual([]);
  });

  it('leaves the ledger balanced after the traced payment', async () => {
    service.child.kill('SIGTERM');
    expect(await service.exited).toBe(0);
    const db = await openDatabase(databaseUrl, dataDir, testPoolMode);
    try {
      await expectLedgerInvariants(db);
    } finally {
      await db.close();
    }
  });
});
