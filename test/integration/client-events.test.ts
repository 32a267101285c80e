import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPayorchClient, type FeedEvent, type PayorchClient, PayorchError } from '@payorch/client';
import { startTestApp, type TestApp } from '../support/app.js';
import { feedCaughtUp } from '../support/feed.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, topUp } from '../support/payments.js';

/** The client's event feed (docs/EVENTS.md) against the real service on a real listener. */

const PAYER = 6601;
const RECIPIENT = 6602;

let t: TestApp;
let client: PayorchClient;
beforeAll(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = t.app.server.address() as AddressInfo;
  const secret = t.secrets.get('wallet-api')?.[0] ?? '';
  client = createPayorchClient({ baseUrl: `http://127.0.0.1:${port}`, serviceId: 'wallet-api', secret });
  await createUser(t, PAYER);
  await createUser(t, RECIPIENT);
  await topUp(t, PAYER, 10_000);
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

const pay = () =>
  client.intents.create(
    { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, currency: 'THB', recipientUserId: RECIPIENT },
    { userId: PAYER },
  );

async function collect(iterator: AsyncGenerator<FeedEvent>): Promise<FeedEvent[]> {
  const events: FeedEvent[] = [];
  for await (const event of iterator) events.push(event);
  return events;
}

describe('client.events', () => {
  it('list() answers a page with nextCursor; iterate() follows the cursor to the end and yields each event once', async () => {
    const start = (await collect(client.events.iterate({ limit: 500 }))).at(-1)?.cursor;
    const first = await pay();
    const second = await pay();
    // On PostgreSQL another test file's transaction, held open past the feed's settle time, could hold these back.
    await feedCaughtUp(t.db);
    const page = await client.events.list({ ...(start === undefined ? {} : { after: start }), limit: 3 });
    expect(page.events.map((e) => e.statusTo)).toEqual(['CREATED', 'VALIDATED', 'AUTHORIZED']);
    expect(page.events[0]).toMatchObject({ intentId: first.intentId, statusFrom: null, amount: '100', currency: 'THB' });
    const rest = await collect(client.events.iterate({ after: page.nextCursor, limit: 2 }));
    expect(
      [...page.events, ...rest].map((e) => `${e.intentId === first.intentId ? 1 : e.intentId === second.intentId ? 2 : 0}:${e.statusTo}`),
    ).toEqual(['1:CREATED', '1:VALIDATED', '1:AUTHORIZED', '1:SETTLED', '2:CREATED', '2:VALIDATED', '2:AUTHORIZED', '2:SETTLED']);
  });

  it('iterate({follow: true}) waits at the end for new events and stops when its signal aborts', async () => {
    const start = (await collect(client.events.iterate({ limit: 500 }))).at(-1)?.cursor;
    const controller = new AbortController();
    const seen: FeedEvent[] = [];
    const following = (async () => {
      for await (const event of client.events.iterate({
        ...(start === undefined ? {} : { after: start }),
        follow: true,
        pollIntervalMs: 20,
        signal: controller.signal,
      })) {
        seen.push(event);
        if (seen.length === 4) controller.abort();
      }
    })();
    const { intentId } = await pay();
    await following;
    expect(seen.map((e) => [e.intentId, e.statusTo])).toEqual([
      [intentId, 'CREATED'],
      [intentId, 'VALIDATED'],
      [intentId, 'AUTHORIZED'],
      [intentId, 'SETTLED'],
    ]);
  });

  it('a cursor the service did not issue is a PayorchError 422 VALIDATION_ERROR', async () => {
    const failure = await client.events.list({ after: 'not-a-cursor' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PayorchError);
    expect(failure).toMatchObject({ status: 422, code: 'VALIDATION_ERROR' });
  });
});
