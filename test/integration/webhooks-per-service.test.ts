import { setTimeout as sleep } from 'node:timers/promises';
import type { WebhookEvent } from '@payorch/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLoop } from '../../src/workers/loop.js';
import { CursorSeal } from '../../src/domain/events/cursor-seal.js';
import { createWebhookWorker, WEBHOOK_DEFAULTS } from '../../src/workers/webhook-worker.js';
import { demoConfigFile, startTestApp, type TestApp } from '../support/app.js';
import { feedCaughtUp } from '../support/feed.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, intentBody, topUp } from '../support/payments.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { captureLogger } from '../support/workers.js';

/**
 * docs/rules.md R61: a webhook receiver that hangs delays only its own service's deliveries. Two
 * services with webhooks, one receiver hanging; the worker runs as in production (its loop's
 * dispatch every 10 ms), and the other service's events must all arrive, in order, while the
 * hanging receiver's first attempt is still waiting for its time-out.
 */

const HANGING = 'wallet-api';
const PROMPT = 'wallet-api-b';
const PROMPT_SECRET = 'test-wallet-api-b-webhook-secret-0123456789';
/** Long enough that "while the first attempt still hangs" is well within it on a loaded machine. */
const TIMEOUT_MS = 8000;
const INTENTS_PER_SERVICE = 3;

const file = demoConfigFile();
const hangingSecret = file.secrets[HANGING] ?? '';
let t: TestApp;
let hanging: WebhookReceiver;
let prompt: WebhookReceiver;
let nextUserId = 7600;

beforeAll(async () => {
  hanging = await startWebhookReceiver(typeof hangingSecret === 'string' ? hangingSecret : (hangingSecret[0] ?? ''));
  prompt = await startWebhookReceiver(PROMPT_SECRET);
  const wallet = file.serviceKeys.find((key) => key.serviceId === HANGING);
  if (wallet === undefined) throw new Error('the demo configuration has no wallet-api key');
  const serviceKeys = [
    ...file.serviceKeys.map((key) =>
      key.serviceId === HANGING ? { ...key, permissions: { ...key.permissions, webhook: { url: hanging.url } } } : key,
    ),
    { ...wallet, serviceId: PROMPT, permissions: { ...wallet.permissions, webhook: { url: prompt.url } } },
  ];
  t = await startTestApp({ file: { ...file, secrets: { ...file.secrets, [PROMPT]: PROMPT_SECRET }, serviceKeys } });
});
afterAll(async () => {
  await t?.close();
  await hanging?.close();
  await prompt?.close();
});

async function pay(service: string): Promise<string> {
  const payer = nextUserId++;
  const recipient = nextUserId++;
  await createUser(t, payer);
  await createUser(t, recipient);
  await topUp(t, payer, 100_000);
  const res = await t.call('POST', '/intents', {
    service,
    user: payer,
    body: intentBody({ operationType: 'P2P_TRANSFER', amount: 1000, recipientUserId: recipient }),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().intentId as string;
}

/** Every event of `service`'s own feed. */
async function feedOf(service: string): Promise<WebhookEvent[]> {
  await feedCaughtUp(t.db);
  const events: WebhookEvent[] = [];
  let after = '';
  for (;;) {
    const res = await t.call('GET', `/events?limit=500${after === '' ? '' : `&after=${after}`}`, { service });
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json() as { events: WebhookEvent[]; nextCursor: string };
    events.push(...page.events);
    if (page.events.length === 0) return events;
    after = page.nextCursor;
  }
}

async function allDelivered(service: string, receiver: WebhookReceiver): Promise<boolean> {
  const expected = await feedOf(service);
  return expected.length > 0 && expected.every((event) => receiver.acknowledged.some((got) => got.cursor === event.cursor));
}

async function waitFor(done: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** The payments settled, and every intent of the feed (top-ups included) arrived whole and in feed order. */
function expectInOrder(service: string, receiver: WebhookReceiver, payments: readonly string[], feed: readonly WebhookEvent[]) {
  for (const id of payments)
    expect(
      feed.filter((event) => event.intentId === id).map((event) => event.statusTo),
      `${service} ${id}`,
    ).toContain('SETTLED');
  for (const id of new Set(feed.map((event) => event.intentId))) {
    expect(receiver.eventsOf(id)).toEqual(feed.filter((event) => event.intentId === id));
  }
}

describe('webhook delivery per service (R61)', () => {
  it("delivers one service's events in order while another service's receiver hangs, then the hanging one's in order once it answers", async () => {
    hanging.answer = () => 'hang';
    const hangingIntents = [];
    const promptIntents = [];
    for (let i = 0; i < INTENTS_PER_SERVICE; i++) {
      hangingIntents.push(await pay(HANGING));
      promptIntents.push(await pay(PROMPT));
    }
    const log = captureLogger();
    const worker = createWebhookWorker({
      db: t.db,
      secrets: () => t.secrets,
      log,
      cursors: new CursorSeal(t.config.cursorSealSecret),
      settings: { ...WEBHOOK_DEFAULTS, retryBaseMs: 10, timeoutMs: TIMEOUT_MS, leaseMs: 2 * TIMEOUT_MS },
    });
    const loop = startLoop('webhooks', 10, () => worker.dispatch(), log);
    try {
      await waitFor(async () => hanging.requests.length > 0, TIMEOUT_MS, 'the hanging receiver to be called');
      const hangStartedAt = Date.now();
      await waitFor(() => allDelivered(PROMPT, prompt), TIMEOUT_MS, `${PROMPT}'s events`);
      // Within the hang: the hanging receiver's first attempt has not timed out yet.
      expect(Date.now() - hangStartedAt).toBeLessThan(TIMEOUT_MS);
      expect(log.events('webhook_failed')).toHaveLength(0);
      expect(hanging.acknowledged).toHaveLength(0);
      // Each of its due first events (the top-ups' too) was tried once, and is still waiting.
      expect(new Set(hanging.requests.map((request) => request.idempotencyKey)).size).toBe(hanging.requests.length);
      expectInOrder(PROMPT, prompt, promptIntents, await feedOf(PROMPT));
      expect(prompt.requests.every((request) => request.valid)).toBe(true);

      hanging.answer = () => 200;
      await waitFor(() => allDelivered(HANGING, hanging), 4 * TIMEOUT_MS, `${HANGING}'s events after it recovered`);
      const failures = log.events('webhook_failed');
      expect(failures.length).toBeGreaterThan(0);
      expect(failures.every((line) => line.bindings.outcome === 'timeout' && line.bindings.serviceId === HANGING)).toBe(true);
      expectInOrder(HANGING, hanging, hangingIntents, await feedOf(HANGING));
      // The other service got nothing twice while the first waited.
      expect(new Set(prompt.requests.map((request) => request.idempotencyKey)).size).toBe(prompt.requests.length);
    } finally {
      await loop.stop();
      await worker.stop();
    }
    await expectLedgerInvariants(t.db);
  }, 60_000);
});
