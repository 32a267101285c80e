import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balances, createUser, topUp } from '../support/payments.js';

/**
 * A refused payment against its idempotency key (docs/rules.md R14, docs/design.md's order of
 * checks): a stored intent wins over every refusal, and a refused one stores nothing, so its key
 * can be retried once the cause is fixed.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  for (const user of [1, 2, 4, 5]) await createUser(t, user);
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

const pay = (user: number, body: { idempotencyKey: string; amount: number; recipientUserId: number }) =>
  t.call('POST', '/intents', { user, body: { operationType: 'P2P_TRANSFER', currency: 'THB', ...body } });

async function intentsUnder(key: string): Promise<number> {
  const { rowCount } = await t.db.query('SELECT 1 FROM intents WHERE idempotency_key = $1', [key]);
  return rowCount ?? 0;
}

describe('a payment refused for insufficient funds', () => {
  it('stores nothing, and its retry with the same key settles once the payer is funded', async () => {
    const key = randomUUID();
    const refused = await pay(1, { idempotencyKey: key, amount: 700, recipientUserId: 2 });
    expect(refused.statusCode).toBe(422);
    expect(refused.json()).toEqual({ error: 'INSUFFICIENT_FUNDS', message: 'the source account lacks funds for this payment' });
    expect(await intentsUnder(key)).toBe(0);

    await topUp(t, 1, 1_000);
    const settled = await pay(1, { idempotencyKey: key, amount: 700, recipientUserId: 2 });
    expect(settled.statusCode, settled.body).toBe(201);
    expect(settled.json()).toMatchObject({ status: 'SETTLED' });
    expect(await balances(t, ['user.1.THB', 'user.2.THB'])).toEqual({ 'user.1.THB': '300', 'user.2.THB': '700' });

    const replay = await pay(1, { idempotencyKey: key, amount: 700, recipientUserId: 2 });
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toEqual({ ...settled.json(), amount: '700', currency: 'THB' });
    const other = await pay(1, { idempotencyKey: key, amount: 300, recipientUserId: 2 });
    expect(other.statusCode).toBe(409);
    expect(other.json()).toEqual({ error: 'CONFLICT', message: 'idempotency key reused with different parameters' });
    expect(await balances(t, ['user.1.THB', 'user.2.THB'])).toEqual({ 'user.1.THB': '300', 'user.2.THB': '700' });
  });
});

describe('a stored intent wins over a refusal of its retry', () => {
  it('a retry whose payer has no funds left gets its replay, or 409 for another payment', async () => {
    await topUp(t, 4, 900);
    const key = randomUUID();
    const first = await pay(4, { idempotencyKey: key, amount: 900, recipientUserId: 2 });
    expect(first.statusCode, first.body).toBe(201);
    expect(await balances(t, ['user.4.THB'])).toEqual({ 'user.4.THB': '0' });

    const replay = await pay(4, { idempotencyKey: key, amount: 900, recipientUserId: 2 });
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toEqual({ ...first.json(), amount: '900', currency: 'THB' });
    const other = await pay(4, { idempotencyKey: key, amount: 901, recipientUserId: 2 });
    expect(other.statusCode).toBe(409);
    expect(other.json().error).toBe('CONFLICT');
    expect(await intentsUnder(key)).toBe(1);
    expect(await balances(t, ['user.4.THB'])).toEqual({ 'user.4.THB': '0' });
  });

  it('a retry that its payer limit would now refuse gets its replay, or 409 for another payment', async () => {
    await topUp(t, 5, 6_000_000);
    const key = randomUUID();
    const first = await pay(5, { idempotencyKey: key, amount: 4_000_000, recipientUserId: 2 });
    expect(first.statusCode, first.body).toBe(201);
    const rest = await pay(5, { idempotencyKey: randomUUID(), amount: 1_000_000, recipientUserId: 2 });
    expect(rest.statusCode, rest.body).toBe(201);
    const overLimit = await pay(5, { idempotencyKey: randomUUID(), amount: 1, recipientUserId: 2 });
    expect(overLimit.statusCode).toBe(422);
    expect(overLimit.json().error).toBe('LIMIT_EXCEEDED');

    const replay = await pay(5, { idempotencyKey: key, amount: 4_000_000, recipientUserId: 2 });
    expect(replay.statusCode, replay.body).toBe(200);
    expect(replay.json()).toEqual({ ...first.json(), amount: '4000000', currency: 'THB' });
    const other = await pay(5, { idempotencyKey: key, amount: 3_999_999, recipientUserId: 2 });
    expect(other.statusCode).toBe(409);
    expect(await balances(t, ['user.5.THB'])).toEqual({ 'user.5.THB': '1000000' });
  });
});
