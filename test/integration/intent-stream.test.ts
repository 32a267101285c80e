import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Broker, createBroker, createMemoryBroker } from '../../src/adapters/broker.js';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { buildApp } from '../../src/app.js';
import { createFeeEngine, type FeeEngine } from '../../src/domain/rules/fees/index.js';
import { intentChannel } from '../../src/domain/intents/store/status-publisher.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { registerAuth } from '../../src/http/plugins/auth.js';
import { registerErrorHandling } from '../../src/http/plugins/errors.js';
import { intentStreamRoutes } from '../../src/http/routes/intent-stream.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { feedCaughtUp, feedCursors } from '../support/feed.js';
import { CursorSeal } from '../../src/domain/events/cursor-seal.js';
import { encodeFeedCursor } from '../../src/domain/events/feed-cursor.js';
import { createMerchant, createUser, intentBody, topUp } from '../support/payments.js';

/** Counts open subscriptions, so a test can see that a stream let go of its channel. */
function counting(inner: Broker) {
  const open = new Map<string, number>();
  const broker: Broker = {
    kind: inner.kind,
    publish: (channel, message) => inner.publish(channel, message),
    async subscribe(channel, handler) {
      const stop = await inner.subscribe(channel, handler);
      open.set(channel, (open.get(channel) ?? 0) + 1);
      return async () => {
        open.set(channel, (open.get(channel) ?? 1) - 1);
        await stop();
      };
    },
    close: () => inner.close(),
  };
  return { broker, openOn: (channel: string) => open.get(channel) ?? 0 };
}

interface SseEvent {
  readonly event: string;
  /** The feed cursor, on events the server took from the event feed. */
  readonly id?: string;
  readonly data: { intentId: string; status: string; updatedAt: string };
}

interface SseClient {
  readonly status: number;
  readonly contentType: string | null;
  readonly events: SseEvent[];
  readonly comments: string[];
  /** Resolves when the server ended the stream (or the client aborted). */
  readonly ended: Promise<void>;
  readonly isEnded: () => boolean;
  abort(): void;
}

const waitUntil = async (condition: () => boolean, timeoutMs = 5_000) => {
  for (let waitedMs = 0; !condition(); waitedMs += 10) {
    if (waitedMs > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};

/** Reads a text/event-stream over a real socket, as a browser's EventSource would. */
async function openSse(
  base: string,
  path: string,
  secrets: ReadonlyMap<string, readonly string[]>,
  service = 'wallet-api',
  extraHeaders: Record<string, string> = {},
): Promise<SseClient> {
  const controller = new AbortController();
  const headers = { ...signedHeaders(service, secrets.get(service)?.[0] ?? '', 'GET', path, ''), ...extraHeaders };
  const response = await fetch(base + path, { headers, signal: controller.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let ended = false;
  const read = async () => {
    if (response.body === null) return;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (block.startsWith(':')) comments.push(block.slice(1).trim());
          else {
            const field = (name: string) =>
              block
                .split('\n')
                .find((line) => line.startsWith(`${name}: `))
                ?.slice(name.length + 2) ?? '';
            const id = field('id');
            events.push({ event: field('event'), data: JSON.parse(field('data')) as SseEvent['data'], ...(id === '' ? {} : { id }) });
          }
        }
      }
    } catch {
      // Aborted by the test.
    } finally {
      ended = true;
    }
  };
  const ended$ = response.ok
    ? read()
    : response.text().then(() => {
        ended = true;
      });
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    events,
    comments,
    ended: ended$,
    isEnded: () => ended,
    abort: () => controller.abort(),
  };
}

const statuses = (client: SseClient) => client.events.map((e) => e.data.status);

const MERCHANT = 7;
const tap = counting(createBroker(process.env.REDIS_URL));
let t: TestApp;
let base: string;

async function issueInvoice(): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: MERCHANT,
    body: intentBody({
      operationType: 'INVOICE_PAYMENT',
      amount: 1_000,
      toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`),
      live: true,
    }),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().intentId as string;
}

const cancel = (intentId: string) => t.call('POST', `/intents/${intentId}/cancel`, { user: MERCHANT, body: { reason: 'test' } });

beforeAll(async () => {
  t = await startTestApp({ broker: tap.broker });
  await createMerchant(t, MERCHANT);
  await createUser(t, 1);
  await createUser(t, 2);
  await topUp(t, 1, 100_000);
  const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = address;
});
afterAll(async () => t?.close());

describe('GET /intents/{id}/stream', () => {
  it('sends the current status first, then each transition, and ends after the final one (cancel)', async () => {
    const intentId = await issueInvoice();
    const client = await openSse(base, `/intents/${intentId}/stream`, t.secrets);
    expect(client.status).toBe(200);
    expect(client.contentType).toMatch(/^text\/event-stream/);
    await waitUntil(() => client.events.length === 1);
    expect(client.events[0]).toEqual({
      event: 'status',
      // The feed cursor of the creation: what a reconnecting client sends back as Last-Event-ID.
      id: expect.any(String),
      data: { intentId, status: 'CREATED', updatedAt: expect.stringMatching(/Z$/) },
    });

    expect((await cancel(intentId)).statusCode).toBe(200);
    await client.ended;
    expect(statuses(client)).toEqual(['CREATED', 'CANCELED']);
    await waitUntil(() => tap.openOn(intentChannel(intentId)) === 0);
  });

  it('relays a confirm: VALIDATED, AUTHORIZED, SETTLED, then ends', async () => {
    const intentId = await issueInvoice();
    const client = await openSse(base, `/intents/${intentId}/stream`, t.secrets);
    await waitUntil(() => client.events.length === 1);
    const res = await t.call('POST', `/intents/${intentId}/confirm`, {
      user: 1,
      body: { payerLedgerAccountId: ledgerAccountId('user.1.THB'), payerUserId: 1, idempotencyKey: randomUUID() },
    });
    expect(res.statusCode, res.body).toBe(200);
    await client.ended;
    expect(statuses(client)).toEqual(['CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLED']);
    // Each live message is matched to its feed event: its cursor is the id a reconnect resumes from.
    await feedCaughtUp(t.db);
    const feed = (await t.call('GET', '/events?limit=500')).json().events as Array<{ cursor: string; intentId: string }>;
    expect(client.events.map((e) => e.id)).toEqual(feed.filter((e) => e.intentId === intentId).map((e) => e.cursor));
  });

  it('a client that subscribes after the end learns the final status and the stream closes at once', async () => {
    const res = await t.call('POST', '/intents', {
      user: 1,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2, live: true }),
    });
    const { intentId } = res.json();
    const client = await openSse(base, `/intents/${intentId}/stream`, t.secrets);
    await client.ended;
    expect(statuses(client)).toEqual(['SETTLED']);
    await waitUntil(() => tap.openOn(intentChannel(intentId)) === 0);
  });

  it('ignores duplicates, out-of-order and foreign messages on the channel', async () => {
    const intentId = await issueInvoice();
    const client = await openSse(base, `/intents/${intentId}/stream`, t.secrets);
    await waitUntil(() => client.events.length === 1);
    const send = (message: unknown) =>
      t.broker.publish(intentChannel(intentId), typeof message === 'string' ? message : JSON.stringify(message));
    const updatedAt = new Date().toISOString();
    await send({ intentId, status: 'CREATED', updatedAt });
    await send('not json');
    await send({ intentId: randomUUID(), status: 'SETTLED', updatedAt });
    await send({ intentId, status: 'NOT_A_STATUS', updatedAt });
    expect((await cancel(intentId)).statusCode).toBe(200);
    await client.ended;
    expect(statuses(client)).toEqual(['CREATED', 'CANCELED']);
  });

  it('unsubscribes when the client disconnects', async () => {
    const intentId = await issueInvoice();
    const client = await openSse(base, `/intents/${intentId}/stream`, t.secrets);
    await waitUntil(() => client.events.length === 1);
    expect(tap.openOn(intentChannel(intentId))).toBe(1);
    client.abort();
    await waitUntil(() => tap.openOn(intentChannel(intentId)) === 0);
  });

  it('is tenant-isolated: 404 for another service, 401 unsigned, and nothing stays subscribed', async () => {
    const intentId = await issueInvoice();
    const other = await openSse(base, `/intents/${intentId}/stream`, t.secrets, 'mobile-gateway');
    expect(other.status).toBe(404);
    const unsigned = await fetch(`${base}/intents/${intentId}/stream`);
    expect(unsigned.status).toBe(401);
    expect(((await unsigned.json()) as { error: string }).error).toBe('UNAUTHORIZED');
    const unknown = await openSse(base, `/intents/${randomUUID()}/stream`, t.secrets);
    expect(unknown.status).toBe(404);
    expect(tap.openOn(intentChannel(intentId))).toBe(0);
  });

  it('a client that reconnects with Last-Event-ID gets the changes it missed from the feed, with their cursors as ids, then ends', async () => {
    const intentId = await issueInvoice();
    const first = await openSse(base, `/intents/${intentId}/stream`, t.secrets);
    await waitUntil(() => first.events.length === 1);
    const lastEventId = first.events[0]?.id as string;
    first.abort();
    // Missed while away: the confirm moves the invoice three times.
    const res = await t.call('POST', `/intents/${intentId}/confirm`, {
      user: 1,
      body: { payerLedgerAccountId: ledgerAccountId('user.1.THB'), payerUserId: 1, idempotencyKey: randomUUID() },
    });
    expect(res.statusCode, res.body).toBe(200);
    const resumed = await openSse(base, `/intents/${intentId}/stream`, t.secrets, 'wallet-api', { 'last-event-id': lastEventId });
    await resumed.ended;
    expect(statuses(resumed)).toEqual(['VALIDATED', 'AUTHORIZED', 'SETTLED']);
    await feedCaughtUp(t.db);
    const feed = (await t.call('GET', `/events?after=${lastEventId}&limit=500`)).json().events as Array<{
      cursor: string;
      intentId: string;
    }>;
    expect(resumed.events.map((e) => e.id)).toEqual(feed.filter((e) => e.intentId === intentId).map((e) => e.cursor));
  });

  it('resumed with the newest id, it sends the current status and then goes live', async () => {
    const intentId = await issueInvoice();
    const first = await openSse(base, `/intents/${intentId}/stream`, t.secrets);
    await waitUntil(() => first.events.length === 1);
    first.abort();
    const resumed = await openSse(base, `/intents/${intentId}/stream`, t.secrets, 'wallet-api', {
      'last-event-id': first.events[0]?.id as string,
    });
    await waitUntil(() => resumed.events.length === 1);
    expect((await cancel(intentId)).statusCode).toBe(200);
    await resumed.ended;
    expect(statuses(resumed)).toEqual(['CREATED', 'CANCELED']);
  });

  it('refuses a Last-Event-ID it did not issue, one sealed for another service, or an unsealed one of earlier versions with 422 and subscribes to nothing', async () => {
    const intentId = await issueInvoice();
    const first = await openSse(base, `/intents/${intentId}/stream`, t.secrets);
    await waitUntil(() => first.events.length === 1);
    first.abort();
    const issued = feedCursors(t).open(first.events[0]?.id as string);
    const foreign = feedCursors(t, 'nfc-terminal').seal(issued);
    for (const id of ['garbage', 'ZTAx', 'x'.repeat(201), foreign, encodeFeedCursor(issued)]) {
      const client = await openSse(base, `/intents/${intentId}/stream`, t.secrets, 'wallet-api', { 'last-event-id': id });
      expect(client.status, id).toBe(422);
    }
    expect(tap.openOn(intentChannel(intentId))).toBe(0);
  });

  it('is documented in OpenAPI as text/event-stream', () => {
    const doc = t.app.swagger() as {
      paths: Record<string, { get?: { responses: Record<string, { content?: Record<string, unknown> }> } }>;
    };
    expect(Object.keys(doc.paths['/intents/{id}/stream']?.get?.responses['200']?.content ?? {})).toEqual(['text/event-stream']);
  });
});

describe('stream limits', () => {
  let small: FastifyInstance;
  let smallBase: string;
  beforeAll(async () => {
    // The same route with short limits, behind the real signature check.
    small = Fastify();
    registerErrorHandling(small, false);
    registerAuth(small, { sql: t.db, secrets: () => t.secrets, adminToken: undefined });
    intentStreamRoutes(small, {
      db: t.db,
      broker: tap.broker,
      cursors: new CursorSeal(t.config.cursorSealSecret),
      heartbeatIntervalMs: 50,
      lifetimeMaxMs: 400,
    });
    smallBase = await small.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => small?.close());

  it('sends heartbeat comments and ends at the maximum lifetime, letting go of the channel', async () => {
    const intentId = await issueInvoice();
    const client = await openSse(smallBase, `/intents/${intentId}/stream`, t.secrets);
    await client.ended;
    expect(statuses(client)).toEqual(['CREATED']);
    expect(client.comments.filter((c) => c === 'heartbeat').length).toBeGreaterThanOrEqual(3);
    await waitUntil(() => tap.openOn(intentChannel(intentId)) === 0);
  });

  it('ends open streams when the app closes, so shutdown does not wait for them', async () => {
    const app = Fastify();
    registerErrorHandling(app, false);
    registerAuth(app, { sql: t.db, secrets: () => t.secrets, adminToken: undefined });
    intentStreamRoutes(app, { db: t.db, broker: tap.broker, cursors: new CursorSeal(t.config.cursorSealSecret) });
    const appBase = await app.listen({ port: 0, host: '127.0.0.1' });
    const intentId = await issueInvoice();
    const client = await openSse(appBase, `/intents/${intentId}/stream`, t.secrets);
    await waitUntil(() => client.events.length === 1);
    const startedAt = Date.now();
    await app.close();
    await client.ended;
    expect(Date.now() - startedAt).toBeLessThan(2_000);
    await waitUntil(() => tap.openOn(intentChannel(intentId)) === 0);
  });
});

/**
 * Two API instances on one database: the stream is open on B, the cancel goes to A. On the
 * embedded default the two share an in-process broker (the only way two apps in one process can
 * hear each other without Redis); with REDIS_URL (the CI's second pass) each instance has its own
 * Redis connection, exactly as two processes would.
 */
describe('across two instances', () => {
  let second: FastifyInstance;
  let secondBase: string;
  let fees: FeeEngine;
  let first: TestApp;
  let firstBase: string;
  beforeAll(async () => {
    const shared = process.env.REDIS_URL === undefined ? createMemoryBroker() : null;
    first = await startTestApp({ broker: shared ?? createBroker(process.env.REDIS_URL) });
    await createMerchant(first, MERCHANT);
    firstBase = await first.app.listen({ port: 0, host: '127.0.0.1' });
    fees = await createFeeEngine();
    second = await buildApp({
      config: first.config,
      db: first.db,
      ledger: first.ledger,
      broker: shared ?? createBroker(process.env.REDIS_URL),
      pspx: createPspxClient({ baseUrl: first.pspxSimulator.url }),
      fees,
      secrets: () => first.secrets,
    });
    secondBase = await second.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await second?.close();
    await fees?.dispose();
    await first?.close();
  });

  it('a stream on one instance sees a transition made on the other', async () => {
    const created = await first.call('POST', '/intents', {
      user: MERCHANT,
      body: intentBody({
        operationType: 'INVOICE_PAYMENT',
        amount: 500,
        toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`),
        live: true,
      }),
    });
    const { intentId } = created.json();
    const client = await openSse(secondBase, `/intents/${intentId}/stream`, first.secrets);
    await waitUntil(() => client.events.length === 1);
    const res = await fetch(`${firstBase}/intents/${intentId}/cancel`, {
      method: 'POST',
      headers: {
        ...signedHeaders('wallet-api', first.secrets.get('wallet-api')?.[0] ?? '', 'POST', `/intents/${intentId}/cancel`, '{}', {
          userId: MERCHANT,
        }),
        'content-type': 'application/json',
      },
      body: '{}',
    });
    expect(res.status).toBe(200);
    await client.ended;
    expect(statuses(client)).toEqual(['CREATED', 'CANCELED']);
  });
});
