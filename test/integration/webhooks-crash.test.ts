import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/database.js';
import type { WebhookEvent } from '@payorch/client';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../../src/config.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { buildIfStale, type ServiceProcess, spawnService } from '../support/service-process.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Webhooks across a SIGKILL of a real service process (node bin/payorch.js serve), with a receiver
 * that fails every event's first attempt, so deliveries are between attempts when the process
 * dies. On PostgreSQL a second process shares the database and keeps delivering; on PGlite the
 * one process is started again on its data directory. Either way every status change arrives,
 * once as far as the receiver's Idempotency-Key tells, and one intent's changes in order.
 */

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const file = readConfigFile(DEMO_CONFIG_FILE);
const secret = secretsOf(file).get('wallet-api')?.[0] ?? '';
const STARTUP_MS_MAX = 60_000;
const DELIVERY_MS_MAX = 90_000;
const PAYMENTS = 20;

let receiver: WebhookReceiver;
let dataDir: string;
let configFile: string;
let schema: TestSchema | undefined;
let databaseUrl = '';

const startService = () =>
  spawnService(
    {
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      REDIS_URL: '',
      CONFIG_FILE: configFile,
      QR_SIGNING_SECRET: 'webhook-crash-qr-secret',
      WEBHOOK_RETRY_BASE_MS: '200',
    },
    STARTUP_MS_MAX,
  );

async function call(service: ServiceProcess, method: string, path: string, options: { user?: number; body?: unknown } = {}) {
  const raw = options.body === undefined ? '' : JSON.stringify(options.body);
  const headers = signedHeaders('wallet-api', secret, method, path, raw, options.user === undefined ? {} : { userId: options.user });
  const response = await fetch(`${service.url}${path}`, {
    method,
    headers: raw === '' ? headers : { ...headers, 'content-type': 'application/json' },
    ...(raw === '' ? {} : { body: raw }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function feed(service: ServiceProcess): Promise<WebhookEvent[]> {
  const events: WebhookEvent[] = [];
  let query = '';
  for (;;) {
    const res = await call(service, 'GET', `/events?limit=500${query}`);
    expect(res.status).toBe(200);
    const page = res.body as unknown as { events: WebhookEvent[]; nextCursor: string };
    if (page.events.length === 0) return events;
    events.push(...page.events);
    query = `&after=${page.nextCursor}`;
  }
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

beforeAll(async () => {
  await buildIfStale();
  receiver = await startWebhookReceiver(secret);
  const firstAttempts = new Set<string>();
  // Every event's first attempt fails: each event is retried, so there is always one in between.
  receiver.answer = (request) => {
    const key = request.idempotencyKey ?? '';
    if (firstAttempts.has(key)) return 200;
    firstAttempts.add(key);
    return 503;
  };
  dataDir = await mkdtemp(join(tmpdir(), 'payorch-webhook-crash-'));
  configFile = join(dataDir, 'config.json');
  const serviceKeys = file.serviceKeys.map((key) =>
    key.serviceId === 'wallet-api' ? { ...key, permissions: { ...key.permissions, webhook: { url: receiver.url } } } : key,
  );
  await writeFile(configFile, JSON.stringify({ ...file, serviceKeys }));
  if (pgUrl !== undefined) {
    schema = await createTestSchema(pgUrl, 'webhook_crash');
    databaseUrl = schema.url;
  }
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await rm(dataDir, { recursive: true, force: true });
  await schema?.drop();
});

describe('webhooks across a crash', () => {
  it(`SIGKILL while ${PAYMENTS} payments' webhooks are between attempts: every change arrives once, one intent's in order`, async () => {
    const running: ServiceProcess[] = [await startService()];
    try {
      // PostgreSQL: a second process on the same database delivers beside the first and outlives it.
      if (pgUrl !== undefined) running.push(await startService());
      const [victim] = running;
      if (victim === undefined) throw new Error('no service');
      const recipient = 8800;
      const payers = Array.from({ length: PAYMENTS }, (_, i) => 8801 + i);
      for (const user of [recipient, ...payers]) {
        expect((await call(victim, 'POST', '/accounts', { user, body: { userId: user, currency: 'THB' } })).status).toBe(201);
      }
      for (const user of payers) {
        const topUp = { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: 50_000 };
        expect((await call(victim, 'POST', '/intents', { user, body: topUp })).body.status).toBe('SETTLED');
      }
      const payments = await Promise.all(
        payers.map((user, index) =>
          call(running[index % running.length] ?? victim, 'POST', '/intents', {
            user,
            body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 1000, recipientUserId: recipient },
          }),
        ),
      );
      expect(payments.map((p) => p.status)).toEqual(payers.map(() => 201));
      await waitFor(async () => receiver.acknowledged.length >= 10, DELIVERY_MS_MAX, 'the first deliveries');
      victim.child.kill('SIGKILL');
      expect(await victim.exited).toBeNull();
      running.shift();
      const atKill = receiver.acknowledged.length;
      running.push(await startService());
      const [survivor] = running;
      if (survivor === undefined) throw new Error('no service');
      let expected: WebhookEvent[] = [];
      // Until every intent is final in the feed and every event of the feed was acknowledged.
      await waitFor(
        async () => {
          expected = await feed(survivor);
          const finished = new Set(expected.filter((e) => e.statusTo === 'SETTLED' || e.statusTo === 'FAILED').map((e) => e.intentId));
          return finished.size === 2 * PAYMENTS && expected.every((e) => receiver.acknowledged.some((got) => got.cursor === e.cursor));
        },
        DELIVERY_MS_MAX,
        'every event to be acknowledged',
      );
      expect(atKill).toBeLessThan(expected.length);
      expect(receiver.requests.every((r) => r.valid)).toBe(true);
      expect(receiver.acknowledged).toHaveLength(expected.length);
      const intents = new Set(expected.map((event) => event.intentId));
      expect(intents.size).toBe(2 * PAYMENTS);
      for (const id of intents) expect(receiver.eventsOf(id)).toEqual(expected.filter((event) => event.intentId === id));
    } finally {
      for (const service of running) service.child.kill('SIGTERM');
      await Promise.all(running.map((service) => service.exited));
    }
    const db = await openDatabase(pgUrl === undefined ? undefined : databaseUrl, dataDir, testPoolMode);
    try {
      await expectLedgerInvariants(db);
      const { rows } = await db.query<{ owed: number }>('SELECT count(*)::int AS owed FROM webhook_deliveries');
      expect(rows[0]?.owed).toBe(0);
    } finally {
      await db.close();
    }
  }, 240_000);
});
