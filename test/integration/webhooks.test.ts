import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AddressInfo } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { EXIT, runCli } from '../../src/cli/main.js';
import type { WebhookEvent } from '@payorch/client';
import { loadConfig, secretsOf } from '../../src/config.js';
import { CursorSeal } from '../../src/domain/events/cursor-seal.js';
import { claimDueDeliveries, takeFeedPage } from '../../src/domain/events/webhooks/deliveries.js';
import { feedCursors } from '../support/feed.js';
import { createWebhookWorker, WEBHOOK_DEFAULTS, type WebhookWorker, type WebhookWorkerSettings } from '../../src/workers/webhook-worker.js';
import { demoConfigFile, startTestApp, type TestApp } from '../support/app.js';
import { feedCaughtUp } from '../support/feed.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balance, createUser, intentBody, topUp } from '../support/payments.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { captureLogger } from '../support/workers.js';

/**
 * Webhooks end to end (docs/OPERATIONS.md, Webhooks): payments through HTTP on a real database,
 * the webhook worker POSTing to a real receiver on a loopback port that checks every request
 * with verifyWebhook, and what the receiver got compared with the service's own GET /events.
 */

const ADMIN_TOKEN = 'test-admin-token';
const file = demoConfigFile();
const secret = secretsOf(file).get('wallet-api')?.[0] ?? '';
/** Tiny waits, so that retries happen within the test; the schedule itself is unit-tested. */
const fastSettings: WebhookWorkerSettings = { ...WEBHOOK_DEFAULTS, retryBaseMs: 10 };

let t: TestApp;
let receiver: WebhookReceiver;
let metrics: Metrics;
let worker: WebhookWorker;
let nextUserId = 7100;

function workerWith(settings: WebhookWorkerSettings): WebhookWorker {
  return createWebhookWorker({
    db: t.db,
    secrets: () => t.secrets,
    log: captureLogger(),
    cursors: new CursorSeal(t.config.cursorSealSecret),
    settings,
    metrics,
  });
}

beforeAll(async () => {
  receiver = await startWebhookReceiver(secret);
  const serviceKeys = file.serviceKeys.map((key) =>
    key.serviceId === 'wallet-api' ? { ...key, permissions: { ...key.permissions, webhook: { url: receiver.url } } } : key,
  );
  t = await startTestApp({ file: { ...file, serviceKeys } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  metrics = createMetrics();
  worker = workerWith(fastSettings);
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
});
afterEach(async () => {
  receiver.answer = () => 200;
  await expectLedgerInvariants(t.db);
});

/** Every event of wallet-api's feed, following nextCursor from the start. */
async function feed(): Promise<WebhookEvent[]> {
  // The first empty page ends the read: nothing committed may still be held back by another file's transaction.
  await feedCaughtUp(t.db);
  const events: WebhookEvent[] = [];
  let after = '';
  for (;;) {
    const res = await t.call('GET', `/events?limit=500${after === '' ? '' : `&after=${after}`}`);
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json() as { events: WebhookEvent[]; nextCursor: string };
    events.push(...page.events);
    if (page.events.length === 0) return events;
    after = page.nextCursor;
  }
}

/** Runs `run` until `done` holds, as the worker's loop would. */
async function runUntil(run: () => Promise<unknown>, done: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await run();
    await sleep(10);
  }
}

/** Until every event of the feed so far was acknowledged. */
async function deliverAll(run: () => Promise<unknown> = () => worker.runOnce()): Promise<WebhookEvent[]> {
  let expected: WebhookEvent[] = [];
  await runUntil(
    run,
    async () => {
      expected = await feed();
      return expected.every((event) => receiver.acknowledged.some((got) => got.cursor === event.cursor));
    },
    'every feed event to be acknowledged',
  );
  return expected;
}

const byIntent = (events: readonly WebhookEvent[]) => {
  const groups = new Map<string, WebhookEvent[]>();
  for (const event of events) groups.set(event.intentId, [...(groups.get(event.intentId) ?? []), event]);
  return groups;
};

async function fundedPayer(): Promise<number> {
  const userId = nextUserId++;
  await createUser(t, userId);
  await topUp(t, userId, 100_000);
  return userId;
}

async function pay(payer: number, recipient: number, amount = 1000): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: payer,
    body: intentBody({ operationType: 'P2P_TRANSFER', amount, recipientUserId: recipient }),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().intentId as string;
}

/** The payorch command in-process against the live listener, as an operator with the admin token. */
async function cli(argv: readonly string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const { port } = t.app.server.address() as AddressInfo;
  const code = await runCli([...argv, '--admin-token', ADMIN_TOKEN], {
    out: (text) => {
      out += text;
    },
    err: (text) => {
      err += text;
    },
    env: { PAYORCH_URL: `http://127.0.0.1:${port}` },
    sleep: async () => {},
  });
  return { code, out, err };
}

const admin = (method: 'GET' | 'POST', url: string) => t.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

function json(res: LightMyRequestResponse, status: number) {
  expect(res.statusCode, res.body).toBe(status);
  return res.json();
}

const attemptsOf = async (outcome: string) => {
  const line = (await metrics.render()).split('\n').find((l) => l.startsWith(`payorch_webhook_attempts_total{outcome="${outcome}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
};

const failedAttempts = async () => (await attemptsOf('http_error')) + (await attemptsOf('timeout')) + (await attemptsOf('network_error'));

describe('webhooks', () => {
  it('deliver every status change of the service once, signed, one intent in order, under 40 concurrent payments', async () => {
    const payers = [];
    for (let i = 0; i < 40; i++) payers.push(await fundedPayer());
    const recipient = await fundedPayer();
    const before = receiver.requests.length;
    const failedBefore = await failedAttempts();
    // The worker delivers while the payments commit, as it does in production.
    let paying = true;
    const delivering = (async () => {
      while (paying) {
        await worker.runOnce();
        await sleep(5);
      }
    })();
    const intents = await Promise.all(payers.map((payer) => pay(payer, recipient)));
    paying = false;
    await delivering;
    const expected = await deliverAll();

    const feedByIntent = byIntent(expected);
    for (const id of intents) {
      expect(feedByIntent.get(id)?.map((e) => e.statusTo)).toContain('SETTLED');
      expect(receiver.eventsOf(id)).toEqual(feedByIntent.get(id));
    }
    expect(receiver.acknowledged).toHaveLength(expected.length);
    const requests = receiver.requests.slice(before);
    expect(requests.every((r) => r.valid)).toBe(true);
    // A repeat is only ever the retry of an attempt the worker saw fail (on a loaded machine, a
    // time-out of an answer that was on its way); the receiver keeps the first copy.
    const repeats = requests.length - new Set(requests.map((r) => r.idempotencyKey)).size;
    expect(repeats).toBeLessThanOrEqual((await failedAttempts()) - failedBefore);
    expect(requests.every((r) => r.idempotencyKey === r.event?.cursor)).toBe(true);
    // The key is the sealed cursor GET /events gives (docs/rules.md R63): no count of anything, and it is wallet-api's own.
    const { rows } = await t.db.query<{ feed_cursor: string }>('SELECT feed_cursor FROM webhook_cursors WHERE service_id = $1', [
      'wallet-api',
    ]);
    for (const r of requests) {
      expect(r.idempotencyKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(feedCursors(t).open(r.idempotencyKey as string).xact).toBeGreaterThan(0n);
      expect(r.idempotencyKey).not.toBe(rows[0]?.feed_cursor);
    }
  });

  it('retry a receiver that fails the first attempts (errors and a hang past the timeout), then deliver in order', async () => {
    const payer = await fundedPayer();
    const recipient = await fundedPayer();
    await deliverAll();
    const impatient = workerWith({ ...fastSettings, timeoutMs: 300, leaseMs: 5000 });
    const [httpErrors, timeouts] = [await attemptsOf('http_error'), await attemptsOf('timeout')];
    let failuresLeft = 4;
    receiver.answer = () => {
      failuresLeft -= 1;
      if (failuresLeft === 0) return 'hang';
      return failuresLeft > 0 ? 503 : 200;
    };
    const id = await pay(payer, recipient);
    const expected = byIntent(await deliverAll(() => impatient.runOnce())).get(id);
    expect(receiver.eventsOf(id)).toEqual(expected);
    expect(expected?.length).toBeGreaterThanOrEqual(3);
    expect(await attemptsOf('http_error')).toBe(httpErrors + 3);
    expect(await attemptsOf('timeout')).toBe(timeouts + 1);
    // Every attempt of one event carries the same key; the receiver acknowledged it once.
    const firstCursor = expected?.[0]?.cursor;
    expect(receiver.requests.filter((r) => r.idempotencyKey === firstCursor)).toHaveLength(5);
  });

  it('a delivery claimed by a worker that died is attempted again within one lease of its claim (WEBHOOK_LEASE_MS), not before', async () => {
    const payer = await fundedPayer();
    const recipient = await fundedPayer();
    await deliverAll();
    const leaseMs = loadConfig({}).webhookLeaseMs;
    expect(leaseMs).toBeLessThanOrEqual(3_000);
    const id = await pay(payer, recipient);
    // Its events in the feed first (on PostgreSQL the feed follows the commits).
    await feed();
    // What a killed process leaves behind: its claims, with nobody renewing them.
    await takeFeedPage(t.db, 'wallet-api', 500, new CursorSeal(t.config.cursorSealSecret));
    const claimedAt = Date.now();
    const dead = await claimDueDeliveries(t.db, 50, leaseMs, 'wallet-api');
    expect(dead.length).toBeGreaterThan(0);
    const survivor = workerWith({ ...fastSettings, leaseMs });
    const arrived = () => receiver.requests.some((r) => r.event?.intentId === id);
    await runUntil(() => survivor.runOnce(), arrived, 'the dead worker’s delivery to be taken over', 10 * leaseMs);
    const takenOverAfterMs = Date.now() - claimedAt;
    // Not before the lease ran out (the database's clock decides, hence the small allowance), and
    // within about one lease after it: the loaded machine's scheduling is the margin.
    expect(takenOverAfterMs).toBeGreaterThanOrEqual(leaseMs - 100);
    expect(takenOverAfterMs).toBeLessThan(leaseMs + 2_000);
    await deliverAll(() => survivor.runOnce());
    const expected = byIntent(await feed()).get(id);
    expect(receiver.eventsOf(id)).toEqual(expected);
  });

  it('a live worker keeps its claim while the receiver takes longer than many leases: no second worker sends the event meanwhile', async () => {
    const payer = await fundedPayer();
    const recipient = await fundedPayer();
    await deliverAll();
    const settings = { ...fastSettings, leaseMs: 300, timeoutMs: 2_000 };
    const slow = workerWith(settings);
    const other = workerWith(settings);
    let hung = false;
    receiver.answer = () => {
      if (hung) return 200;
      hung = true;
      return 'hang';
    };
    const id = await pay(payer, recipient);
    const sent = () => receiver.requests.filter((r) => r.event?.intentId === id).length;
    await feed();
    const slowRun = slow.runOnce();
    await runUntil(
      () => Promise.resolve(),
      () => sent() > 0,
      'the first attempt',
      10_000,
    );
    // The first attempt hangs for its whole time-out, over six leases; the other worker keeps looking.
    const hangEnds = Date.now() + settings.timeoutMs - 200;
    while (Date.now() < hangEnds) {
      await other.runOnce();
      await sleep(50);
    }
    expect(sent()).toBe(1);
    expect((await slowRun).failed).toBeGreaterThanOrEqual(1);
    await deliverAll(() => other.runOnce());
    expect(receiver.eventsOf(id)).toEqual(byIntent(await feed()).get(id));
  });

  it('keep an event dead after the window, hold back only its own intent, list it, and redeliver it on request', async () => {
    const payer = await fundedPayer();
    const other = await fundedPayer();
    const recipient = await fundedPayer();
    await deliverAll();
    const shortWindow = workerWith({ ...fastSettings, retryWindowMs: 60 });
    const blocked = await pay(payer, recipient);
    receiver.answer = (request) => (request.event?.intentId === blocked ? 410 : 200);
    const delivered = await pay(other, recipient);

    const dead = async () => json(await admin('GET', '/admin/webhooks/dead'), 200).deadWebhooks as Array<Record<string, unknown>>;
    await runUntil(
      () => shortWindow.runOnce(),
      async () => (await dead()).length > 0,
      'the delivery to die',
    );
    const feedByIntent = byIntent(await feed());
    await runUntil(
      () => shortWindow.runOnce(),
      () => receiver.eventsOf(delivered).length === feedByIntent.get(delivered)?.length,
      'the other intent to arrive',
    );
    const blockedEvents = feedByIntent.get(blocked) ?? [];
    const [entry] = await dead();
    expect(entry).toMatchObject({
      cursor: blockedEvents[0]?.cursor,
      serviceId: 'wallet-api',
      intentId: blocked,
      lastOutcome: 'http_error',
      lastHttpStatus: 410,
      heldBack: blockedEvents.length - 1,
      event: blockedEvents[0],
    });
    expect(receiver.eventsOf(blocked)).toEqual([]);
    expect(receiver.eventsOf(delivered)).toEqual(feedByIntent.get(delivered));
    const scrape = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(scrape).toMatch(/^payorch_webhook_dead 1$/m);
    expect(scrape).toMatch(new RegExp(`^payorch_webhook_backlog ${blockedEvents.length - 1}$`, 'm'));

    // A held-back event is not dead: 409, and nothing changes.
    json(await admin('POST', `/admin/webhooks/dead/${blockedEvents[1]?.cursor}/redeliver`), 409);
    receiver.answer = () => 200;
    // The operator's way: payorch admin webhooks dead list, then redeliver.
    const listed = await cli(['admin', 'webhooks', 'dead', 'list']);
    expect(listed.code, listed.err).toBe(EXIT.OK);
    expect(listed.out).toMatch(new RegExp(`^${blockedEvents[0]?.cursor}\\s+wallet-api\\s+${blocked}\\s+\\d+\\s+http_error\\s+410\\s`, 'm'));
    const redelivered = await cli(['admin', 'webhooks', 'dead', 'redeliver', blockedEvents[0]?.cursor ?? '', '--json']);
    expect(redelivered.code, redelivered.err).toBe(EXIT.OK);
    expect(JSON.parse(redelivered.out)).toEqual({ cursor: blockedEvents[0]?.cursor, serviceId: 'wallet-api', intentId: blocked });
    await deliverAll();
    expect(receiver.eventsOf(blocked)).toEqual(blockedEvents);
    expect(await dead()).toEqual([]);
    json(await admin('POST', `/admin/webhooks/dead/${blockedEvents[0]?.cursor}/redeliver`), 404);
    expect((await cli(['admin', 'webhooks', 'dead', 'redeliver', blockedEvents[0]?.cursor ?? ''])).code).toBe(EXIT.REFUSED);
    expect((await cli(['admin', 'webhooks', 'dead', 'resend'])).code).toBe(EXIT.USAGE);
    const { rows } = await t.db.query('SELECT actor, action FROM admin_changes WHERE entity = $1 AND entity_id = $2', [
      'webhook-delivery',
      blockedEvents[0]?.cursor,
    ]);
    expect(rows).toEqual([{ actor: 'admin-token', action: 'redeliver' }]);
  });

  it("deliver a refund as a `refund` event of its original, after the original's own events", async () => {
    const payer = await fundedPayer();
    const recipient = await fundedPayer();
    const original = await pay(payer, recipient, 5000);
    const paid = await balance(t, `user.${payer}.THB`);
    const res = await t.call('POST', `/intents/${original}/refunds`, {
      user: recipient,
      body: { idempotencyKey: randomUUID(), amount: 1200, reason: 'returned goods' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { refundId } = res.json() as { refundId: string };
    const expected = byIntent(await deliverAll()).get(original) ?? [];
    const got = receiver.eventsOf(original);
    expect(got).toEqual(expected);
    expect(got.slice(0, -1).every((event) => event.type === 'intent')).toBe(true);
    expect(got.at(-1)).toMatchObject({
      type: 'refund',
      refundId,
      intentId: original,
      operationType: 'P2P_TRANSFER',
      amount: '1200',
      statusFrom: null,
      statusTo: 'SETTLED',
    });
    expect(await balance(t, `user.${payer}.THB`)).toBe(paid + 1200n);
  });

  it('refuse hostile webhook URLs and admin input with documented 4xx answers, changing nothing', async () => {
    const keyBefore = json(await admin('GET', '/admin/service-keys/wallet-api'), 200);
    for (const url of [
      'javascript:alert(1)',
      'file:///etc/passwd',
      'https://user:pw@evil.example/',
      'https://exаmple.com/',
      'http://2130706433/',
    ]) {
      const res = await t.app.inject({
        method: 'PATCH',
        url: '/admin/service-keys/wallet-api',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ permissions: { ...keyBefore.permissions, webhook: { url } } }),
      });
      expect(json(res, 422)).toMatchObject({ error: 'VALIDATION_ERROR', message: expect.stringContaining('body.permissions.webhook.url') });
    }
    expect(json(await admin('GET', '/admin/service-keys/wallet-api'), 200)).toEqual(keyBefore);

    // Past the router's 100 characters a path parameter is 400 (docs/SECURITY.md §6); within them the schema's 422.
    expect(json(await admin('POST', `/admin/webhooks/dead/${'a'.repeat(101)}/redeliver`), 400).error).toBe('BAD_REQUEST');
    expect(json(await admin('POST', '/admin/webhooks/dead/a%2F..%2Fb/redeliver'), 422).error).toBe('VALIDATION_ERROR');
    expect(json(await admin('POST', "/admin/webhooks/dead/x'%20OR%201=1/redeliver"), 422).error).toBe('VALIDATION_ERROR');
    expect(json(await admin('GET', '/admin/webhooks/dead?limit=0'), 422).error).toBe('VALIDATION_ERROR');
    expect(json(await admin('POST', '/admin/webhooks/dead/ZTk5OTk5/redeliver'), 404).error).toBe('NOT_FOUND');
    const unsigned = await t.call('POST', '/admin/webhooks/dead/ZTk5OTk5/redeliver', { service: 'wallet-api' });
    expect(json(unsigned, 403).error).toBe('FORBIDDEN');
  });
});
