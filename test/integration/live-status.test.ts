import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBroker } from '../../src/adapters/broker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, intentBody, topUp } from '../support/payments.js';
import { recording, until } from '../support/recording-broker.js';

const tap = recording(createBroker(process.env.REDIS_URL));
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ broker: tap.broker });
  await createUser(t, 1);
  await createUser(t, 2);
  await topUp(t, 1, 10_000);
});
afterAll(async () => t?.close());

describe('live status messages', () => {
  it('publishes every transition of a live intent on intent.{id}, in order', async () => {
    const res = await t.call('POST', '/intents', {
      user: 1,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2, live: true }),
    });
    const { intentId } = res.json();
    await until(() => tap.statusesOf(intentId).length === 4);
    const mine = tap.published.filter((p) => p.channel === `intent.${intentId}`);
    expect(mine.map((p) => p.message.status)).toEqual(['CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLED']);
    for (const { message } of mine)
      expect(message).toEqual({ intentId, status: expect.any(String), updatedAt: expect.stringMatching(/Z$/) });
  });

  it('publishes nothing for an intent without live', async () => {
    const res = await t.call('POST', '/intents', {
      user: 1,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2 }),
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(tap.published.some((p) => p.channel === `intent.${res.json().intentId}`)).toBe(false);
  });

  it('a broker failure is logged and never breaks the transition', async () => {
    tap.setFailing(true);
    try {
      const res = await t.call('POST', '/intents', {
        user: 1,
        body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2, live: true }),
      });
      expect(res.statusCode).toBe(201);
      expect(res.json().status).toBe('SETTLED');
    } finally {
      tap.setFailing(false);
    }
    await expectLedgerInvariants(t.db);
  });

  it('reaches a subscriber of the channel through the broker', async () => {
    const received: string[] = [];
    const created = await t.call('POST', '/intents', {
      user: 1,
      body: intentBody({
        operationType: 'INVOICE_PAYMENT',
        amount: 100,
        toLedgerAccountId: (await t.call('POST', '/accounts', { user: 2, body: { userId: 2, currency: 'THB' } })).json().ledgerAccountId,
        live: true,
      }),
    });
    const { intentId } = created.json();
    const stop = await t.broker.subscribe(`intent.${intentId}`, (message) => received.push(message));
    await tap.broker.publish(`intent.${intentId}`, JSON.stringify({ intentId, status: 'CANCELED', updatedAt: new Date().toISOString() }));
    await until(() => received.length === 1);
    await stop();
    expect(JSON.parse(received[0] ?? '{}')).toMatchObject({ intentId, status: 'CANCELED' });
  });
});
