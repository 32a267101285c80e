import { randomBytes, randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { connectEventBus, type EventBusSettings } from '../../src/adapters/event-bus.js';
import type { Logger } from '../../src/adapters/logger.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { CursorSeal, EVENT_BUS_SCOPE } from '../../src/domain/events/cursor-seal.js';
import { type FeedEvent, feedEventView, readFeed } from '../../src/domain/events/feed.js';
import { createEventBusPublisher, type EventBusPublisher } from '../../src/workers/event-bus-publisher.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { feedCaughtUp } from '../support/feed.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, intentBody, topUp } from '../support/payments.js';

/**
 * NATS JetStream (docs/EVENTS.md, docs/rules.md R56) against a real server: NATS_URL, which the
 * CI's PostgreSQL pass sets (.ci/run). Each run has a stream and subjects of its own, so runs in
 * parallel on one server do not meet.
 */
const natsUrl = process.env.NATS_URL;

describe('EVENT_BUS_URL', () => {
  it('takes nats:// addresses and refuses anything else at start, without echoing the value', () => {
    expect(loadConfig({ EVENT_BUS_URL: 'nats://127.0.0.1:4222,nats://10.0.0.2:4222' }).eventBusUrl).toBe(
      'nats://127.0.0.1:4222,nats://10.0.0.2:4222',
    );
    expect(loadConfig({}).eventBusStream).toBe('PAYORCH_EVENTS');
    expect(loadConfig({}).eventBusSubjectPrefix).toBe('payorch.events');
    for (const bad of ['http://secret-host:4222', 'nats://', 'redis://u:hunter2@h:1']) {
      expect(() => loadConfig({ EVENT_BUS_URL: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ EVENT_BUS_URL: bad })).not.toThrow(/secret-host|hunter2/);
    }
    expect(() => loadConfig({ EVENT_BUS_STREAM: 'has space' })).toThrow(ConfigError);
    expect(() => loadConfig({ EVENT_BUS_SUBJECT_PREFIX: 'payorch.>' })).toThrow(ConfigError);
  });
});

const quiet = { info() {}, warn() {}, error() {}, debug() {}, child: () => quiet } as unknown as Logger;
const PAYERS = [8001, 8002, 8003, 8004];
const RECIPIENT = 8100;

describe.runIf(natsUrl !== undefined)('publishing the feed to NATS JetStream', () => {
  const run = randomBytes(5).toString('hex');
  const settings: EventBusSettings = { streamName: `PAYORCH_EVENTS_TEST_${run}`, subjectPrefix: `payorch-test-${run}.events` };
  let t: TestApp;
  let nc: NatsConnection;

  const publisher = (db: Database): EventBusPublisher =>
    createEventBusPublisher({
      db,
      connect: () => connectEventBus(natsUrl as string, settings),
      log: quiet,
      cursors: cursors(),
      settings: { subjectPrefix: settings.subjectPrefix, readerName: `nats:${settings.streamName}`, batchSizeMax: 7 },
    });

  const cursors = () => new CursorSeal(t.config.cursorSealSecret);
  /** The message id of an event: its position sealed for the bus, no count of anything (docs/rules.md R63). */
  const idOf = (e: FeedEvent) => cursors().seal(EVENT_BUS_SCOPE, e.position);

  /** Every message in the stream, oldest first. */
  async function streamed(): Promise<Array<{ subject: string; id: string; body: unknown }>> {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(settings.streamName);
    const messages = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq += 1) {
      const m = await jsm.streams.getMessage(settings.streamName, { seq });
      if (m !== null) messages.push({ subject: m.subject, id: m.header.get('Nats-Msg-Id'), body: m.json() });
    }
    return messages;
  }

  async function drain(p: EventBusPublisher): Promise<void> {
    await feedCaughtUp(t.db);
    while ((await p.runOnce()) > 0);
  }

  async function pay(payer: number): Promise<void> {
    const res = await t.call('POST', '/intents', {
      user: payer,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: RECIPIENT }),
    });
    expect(res.statusCode, res.body).toBe(201);
  }

  beforeAll(async () => {
    t = await startTestApp();
    nc = await connect({ servers: natsUrl as string });
    for (const user of [...PAYERS, RECIPIENT]) await createUser(t, user);
    for (const payer of PAYERS) await topUp(t, payer, 10_000);
  });
  afterAll(async () => {
    if (nc !== undefined) {
      await (await jetstreamManager(nc)).streams.delete(settings.streamName).catch(() => false);
      await nc.close();
    }
    await t?.close();
  });
  afterEach(async () => expectLedgerInvariants(t.db));

  it('creates the stream and publishes every feed event once, in feed order: subject per service, Nats-Msg-Id = the sealed position, body = the GET /events object', async () => {
    await Promise.all(PAYERS.map(pay));
    const p = publisher(t.db);
    await drain(p);
    await p.standBy();
    await feedCaughtUp(t.db);
    const feed = await readFeed(t.db, { after: null, limit: 500 });
    expect(feed.events.length).toBe(PAYERS.length * 8);
    expect(await streamed()).toEqual(
      feed.events.map((e) => ({ subject: `${settings.subjectPrefix}.${e.serviceId}`, id: idOf(e), body: feedEventView(e, cursors()) })),
    );
  });

  it('publishes a refund as a `refund` event of its original, with its refundId, as GET /events shows it', async () => {
    await pay(PAYERS[0] as number);
    const feedBefore = await readFeed(t.db, { after: null, limit: 500 });
    const original = feedBefore.events.at(-1)?.intentId as string;
    const res = await t.call('POST', `/intents/${original}/refunds`, {
      user: RECIPIENT,
      body: { idempotencyKey: randomUUID(), amount: 40, reason: 'returned goods' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { refundId } = res.json() as { refundId: string };
    const p = publisher(t.db);
    await drain(p);
    await p.standBy();
    const refunds = (await streamed()).filter((m) => (m.body as { type?: unknown }).type === 'refund');
    expect(refunds).toHaveLength(1);
    const feed = await readFeed(t.db, { after: null, limit: 500 });
    const event = feed.events.find((e) => feedEventView(e, cursors()).type === 'refund');
    expect(event).toBeDefined();
    expect(refunds[0]).toEqual({
      subject: `${settings.subjectPrefix}.${event?.serviceId}`,
      id: event === undefined ? undefined : idOf(event),
      body: event === undefined ? undefined : feedEventView(event, cursors()),
    });
    expect(refunds[0]?.body).toMatchObject({
      type: 'refund',
      refundId,
      intentId: original,
      amount: '40',
      statusFrom: null,
      statusTo: 'SETTLED',
    });
  });

  it('a publisher that dies after the acknowledgement and before storing its position: the next resumes behind the stream, a repeated batch is dropped by Nats-Msg-Id, each event is held once', async () => {
    await Promise.all(PAYERS.map(pay));
    // The position write fails once, as if the process died right after the stream acknowledged.
    let failStore = true;
    const crashing: Database = {
      ...t.db,
      async query(text, params) {
        if (failStore && text.includes('INSERT INTO event_feed_readers')) {
          failStore = false;
          throw new Error('process killed');
        }
        return t.db.query(text, params);
      },
    };
    const before = (await streamed()).length;
    const first = publisher(crashing);
    await feedCaughtUp(t.db);
    // Published and acknowledged, position not stored: the run reports a failure.
    expect(await first.runOnce()).toBe(0);
    expect((await streamed()).length).toBe(before + 7);
    await first.standBy();
    // The next leader starts from the stored position, behind what the stream already holds.
    await drain(publisher(t.db));
    await feedCaughtUp(t.db);
    const feed = await readFeed(t.db, { after: null, limit: 500 });
    const messages = await streamed();
    expect(messages.map((m) => m.id)).toEqual(feed.events.map(idOf));

    // Repeating a whole batch straight to the stream (past the publisher's own resume) is dropped by Nats-Msg-Id.
    const bus = await connectEventBus(natsUrl as string, settings);
    const again = feed.events.slice(0, 5).map((e) => ({ subject: `${settings.subjectPrefix}.${e.serviceId}`, id: idOf(e), data: '{}' }));
    expect(await bus.publish(again)).toBe(5);
    await bus.close();
    expect(await streamed()).toEqual(messages);
  });
});
