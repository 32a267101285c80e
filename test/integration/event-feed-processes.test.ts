import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { CursorSeal, EVENT_BUS_SCOPE } from '../../src/domain/events/cursor-seal.js';
import { readFeed } from '../../src/domain/events/feed.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { feedCaughtUp } from '../support/feed.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { buildIfStale, callAsWalletApi, type ServiceProcess, spawnService } from '../support/service-process.js';

/**
 * The feed across real processes (docs/EVENTS.md): two `payorch serve` on one PostgreSQL schema,
 * 40 payments at once through both, one process killed with SIGKILL in the middle of them and
 * started again. A reader following nextCursor the whole time sees every committed change of every
 * intent once, in order; with NATS_URL the stream holds each feed event once, though the killed
 * process may have been the publisher.
 */
const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const natsUrl = process.env.NATS_URL;
const STARTUP_MS_MAX = 60_000;
const SETTLE_MS_MAX = 30_000;
const PAYERS = Array.from({ length: 40 }, (_, i) => 9001 + i);
const RECIPIENT = 9100;
const run = randomBytes(5).toString('hex');
const stream = { name: `PAYORCH_EVENTS_PROC_${run}`, prefix: `payorch-proc-${run}.events` };

interface WireEvent {
  cursor: string;
  intentId: string;
  statusFrom: string | null;
  statusTo: string;
}

let schema: TestSchema | undefined;
let databaseUrl: string;
let db: Database;

async function startService(): Promise<ServiceProcess> {
  return spawnService(
    {
      DATABASE_URL: databaseUrl,
      REDIS_URL: '',
      QR_SIGNING_SECRET: 'feed-processes-qr-secret',
      OUTBOX_INTERVAL_MS: '50',
      EVENT_FEED_INTERVAL_MS: '50',
      ...(natsUrl === undefined ? {} : { EVENT_BUS_URL: natsUrl, EVENT_BUS_STREAM: stream.name, EVENT_BUS_SUBJECT_PREFIX: stream.prefix }),
    },
    STARTUP_MS_MAX,
  );
}

const call = (service: ServiceProcess, method: string, path: string, options: { user?: number; body?: unknown } = {}) =>
  callAsWalletApi(service.url, method, path, options);

const pay = (service: ServiceProcess, payer: number) =>
  call(service, 'POST', '/intents', {
    user: payer,
    body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, currency: 'THB', recipientUserId: RECIPIENT },
  });

describe.runIf(pgUrl !== undefined)('the feed across two processes and a SIGKILL (PostgreSQL)', () => {
  beforeAll(async () => {
    await buildIfStale();
    schema = await createTestSchema(pgUrl as string, 'feed');
    databaseUrl = schema.url;
  }, 120_000);

  afterAll(async () => {
    await db?.close();
    await schema?.drop();
    if (natsUrl !== undefined) {
      const nc = await connect({ servers: natsUrl });
      await (await jetstreamManager(nc)).streams.delete(stream.name).catch(() => false);
      await nc.close();
    }
  });

  it('every change once and in order for a reader following nextCursor; the stream holds each event once', async () => {
    let a = await startService();
    const b = await startService();
    const services: ServiceProcess[] = [a, b];
    try {
      db = await openDatabase(databaseUrl, '', testPoolMode);
      for (const user of [...PAYERS, RECIPIENT]) {
        expect((await call(b, 'POST', '/accounts', { user, body: { userId: user, currency: 'THB' } })).status).toBe(201);
      }
      for (const payer of PAYERS) {
        const res = await call(b, 'POST', '/intents', {
          user: payer,
          body: { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: 10_000 },
        });
        expect(res.body.status).toBe('SETTLED');
      }

      // The reader follows the cursor on the process that survives, from the start, all along.
      const seen: WireEvent[] = [];
      let cursor: string | undefined;
      let reading = true;
      const readOnce = async () => {
        const res = await call(b, 'GET', `/events?limit=9${cursor === undefined ? '' : `&after=${cursor}`}`);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        seen.push(...(res.body.events as WireEvent[]));
        cursor = res.body.nextCursor as string;
        return (res.body.events as WireEvent[]).length;
      };
      const reader = (async () => {
        while (reading) if ((await readOnce()) === 0) await sleep(10);
      })();

      // 40 payments at once, half through each process; one process dies while they run.
      const payments = PAYERS.map((payer, i) => pay(i % 2 === 0 ? a : b, payer).catch(() => null));
      // Soon enough that the process is still answering them on a fast machine.
      await sleep(5);
      a.child.kill('SIGKILL');
      expect(await a.exited).toBeNull();
      const answers = await Promise.all(payments);
      expect(
        answers.some((answer) => answer === null),
        'the kill cut requests in flight',
      ).toBe(true);
      a = await startService();
      services[0] = a;
      // A few more after the restart, through the restarted process.
      for (const payer of PAYERS.slice(0, 4)) expect((await pay(a, payer)).status).toBe(201);

      reading = false;
      await reader;
      // Read to the end, once no transaction still open holds a committed change back.
      await feedCaughtUp(db, SETTLE_MS_MAX);
      while ((await readOnce()) > 0);

      // What committed, from the audit log: each intent's status changes in order.
      const { rows } = await db.query<{ intent_id: string; status_from: string | null; status_to: string }>(
        `SELECT e.intent_id, e.status_from, e.status_to FROM intent_events e JOIN intents i ON i.id = e.intent_id
          WHERE i.service_id = 'wallet-api' ORDER BY e.id`,
      );
      const expected = new Map<string, string[]>();
      for (const row of rows)
        expected.set(row.intent_id, [...(expected.get(row.intent_id) ?? []), `${row.status_from ?? ''}>${row.status_to}`]);
      const got = new Map<string, string[]>();
      for (const event of seen)
        got.set(event.intentId, [...(got.get(event.intentId) ?? []), `${event.statusFrom ?? ''}>${event.statusTo}`]);
      expect(got).toEqual(expected);
      expect(new Set(seen.map((e) => e.cursor)).size).toBe(seen.length);
      expect(expected.size).toBeGreaterThanOrEqual(PAYERS.length + 4);
      await expectLedgerInvariants(db);

      if (natsUrl !== undefined) {
        const feed = await readFeed(db, { after: null, limit: 500 });
        expect(feed.events.length).toBeLessThan(500);
        const nc = await connect({ servers: natsUrl });
        try {
          const jsm = await jetstreamManager(nc);
          const deadline = Date.now() + SETTLE_MS_MAX;
          while ((await jsm.streams.info(stream.name).catch(() => null))?.state.messages !== feed.events.length) {
            if (Date.now() > deadline) throw new Error('the stream did not catch up with the feed');
            await sleep(100);
          }
          const ids: string[] = [];
          for (let seq = 1; seq <= feed.events.length; seq += 1) {
            ids.push((await jsm.streams.getMessage(stream.name, { seq }))?.header.get('Nats-Msg-Id') ?? '');
          }
          // Message ids are the sealed positions (docs/rules.md R63), sealed with the processes' key.
          const seal = new CursorSeal('feed-processes-qr-secret');
          expect(ids).toEqual(feed.events.map((e) => seal.seal(EVENT_BUS_SCOPE, e.position)));
        } finally {
          await nc.close();
        }
      }
    } finally {
      for (const service of services) service.child.kill('SIGKILL');
    }
  }, 180_000);
});
