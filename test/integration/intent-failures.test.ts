import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ledger } from '../../src/ledger/ledger.js';
import { createBroker } from '../../src/adapters/broker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { openTestDatabase } from '../support/database.js';
import { type GoneAtBegin, goneAtNextBegin } from '../support/gone-at-begin.js';
import { type ItemsOf, type LostCommitAnswers, losingCommitAnswers } from '../support/lost-commit-answers.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balances, createUser, intentBody, topUp } from '../support/payments.js';
import { recording, until } from '../support/recording-broker.js';

/** A ledger whose settlement chains name a receiver that does not exist, while faults are on. */
const faults = { settlementFails: false };
const faulty = (inner: Ledger): Ledger => ({
  createAccounts: (sql, accounts) => inner.createAccounts(sql, accounts),
  lookupAccounts: (sql, ids) => inner.lookupAccounts(sql, ids),
  lookupTransfers: (sql, ids) => inner.lookupTransfers(sql, ids),
  expirePendingTransfers: (sql, n) => inner.expirePendingTransfers(sql, n),
  createTransfers: (sql, transfers) =>
    inner.createTransfers(
      sql,
      faults.settlementFails ? transfers.map((t, i) => (i === 2 ? { ...t, creditAccountId: randomUUID() } : t)) : transfers,
    ),
});

/** The intents a statement opens: intent_open_batch's third parameter. */
const opensIntents: ItemsOf = (text, params) =>
  text.includes('intent_open_batch') ? (JSON.parse(String(params?.[2])) as unknown[]).length : null;

const BATCH_PAYERS = [11, 12, 13, 14, 15, 16, 17, 18];

const logLines: Array<Record<string, unknown>> = [];
const tap = recording(createBroker(process.env.REDIS_URL));
let t: TestApp;
let lost: LostCommitAnswers;
let gone: GoneAtBegin;
beforeAll(async () => {
  lost = losingCommitAnswers(await openTestDatabase(), opensIntents);
  gone = goneAtNextBegin(lost.db);
  t = await startTestApp({
    db: gone.db,
    broker: tap.broker,
    wrapLedger: faulty,
    logStream: { write: (line) => void logLines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  await createUser(t, 1);
  await createUser(t, 2);
  await topUp(t, 1, 10_000);
  for (const payer of BATCH_PAYERS) {
    await createUser(t, payer);
    await topUp(t, payer, 1_000);
  }
});
afterAll(async () => t?.close());

describe('a settlement the ledger refuses', () => {
  it('answers 500 LEDGER_TRANSFER_ERROR naming the ledger status, voids the reservation and records FAILED', async () => {
    const before = await balances(t, ['user.1.THB', 'user.2.THB', 'system.transit.INTERNAL_P2P.THB']);
    const body = intentBody({ operationType: 'P2P_TRANSFER', amount: 700, recipientUserId: 2 });
    faults.settlementFails = true;
    const res = await t.call('POST', '/intents', { user: 1, body }).finally(() => {
      faults.settlementFails = false;
    });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'LEDGER_TRANSFER_ERROR', message: expect.stringContaining('credit_account_not_found') });
    expect(await balances(t, ['user.1.THB', 'user.2.THB', 'system.transit.INTERNAL_P2P.THB'])).toEqual(before);
    await expectLedgerInvariants(t.db);

    const replay = await t.call('POST', '/intents', { user: 1, body });
    expect(replay.statusCode).toBe(200);
    expect(replay.json().status).toBe('FAILED');
    const events = (await t.call('GET', `/intents/${replay.json().intentId}/events`)).json().events;
    expect(events.map((e: { statusTo: string }) => e.statusTo)).toEqual(['CREATED', 'VALIDATED', 'AUTHORIZED', 'FAILED']);
    expect(events[3].reason).toContain('credit_account_not_found');
    const intent = (await t.call('GET', `/intents/${replay.json().intentId}`)).json();
    expect(intent.failureReason).toContain('credit_account_not_found');
  });

  it('the next payment settles normally', async () => {
    const res = await t.call('POST', '/intents', {
      user: 1,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2 }),
    });
    expect(res.json().status).toBe('SETTLED');
    await expectLedgerInvariants(t.db);
  });
});

describe('a group commit whose COMMIT answer is lost', () => {
  it('answers 201 for the payment it stored, publishes its live message, moves its money once, and a retry of the key replays it', async () => {
    const accounts = ['user.1.THB', 'user.2.THB'];
    const pay = (body: unknown) => t.call('POST', '/intents', { user: 1, body });
    const body = intentBody({ operationType: 'P2P_TRANSFER', amount: 300, recipientUserId: 2, live: true });
    const before = await balances(t, accounts);
    lost.arm();
    const res = await pay(body);
    expect(lost.armed, 'the payment met the lost answer').toBe(false);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().status).toBe('SETTLED');
    const stored = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM intents WHERE idempotency_key = $1', [
      body.idempotencyKey,
    ]);
    expect(stored.rows[0]?.n).toBe(1);
    const { intentId } = res.json();
    await until(() => tap.statusesOf(intentId).length > 0);
    expect(tap.statusesOf(intentId)).toEqual(['SETTLED']);
    const after = await balances(t, accounts);

    // Its money moved exactly as one plain payment of the same amount moves it.
    const plain = await pay(intentBody({ operationType: 'P2P_TRANSFER', amount: 300, recipientUserId: 2 }));
    expect(plain.statusCode).toBe(201);
    const afterPlain = await balances(t, accounts);
    for (const account of accounts)
      expect(BigInt(after[account] ?? 0) - BigInt(before[account] ?? 0), account).toBe(
        BigInt(afterPlain[account] ?? 0) - BigInt(after[account] ?? 0),
      );
    await expectLedgerInvariants(t.db);

    const replay = await pay(body);
    expect(replay.statusCode).toBe(200);
    expect(replay.json().intentId).toBe(res.json().intentId);
  });

  it('answers a payment whose settlement the ledger refused with that refusal, not 500 INTERNAL_ERROR, and publishes FAILED', async () => {
    const accounts = ['user.1.THB', 'user.2.THB', 'system.transit.INTERNAL_P2P.THB'];
    const before = await balances(t, accounts);
    const body = intentBody({ operationType: 'P2P_TRANSFER', amount: 200, recipientUserId: 2, live: true });
    faults.settlementFails = true;
    lost.arm();
    const res = await t.call('POST', '/intents', { user: 1, body }).finally(() => {
      faults.settlementFails = false;
    });
    expect(lost.armed, 'the payment met the lost answer').toBe(false);
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toEqual({
      error: 'LEDGER_TRANSFER_ERROR',
      message: expect.stringMatching(/^ledger refused the settlement: .*credit_account_not_found/),
    });
    expect(await balances(t, accounts)).toEqual(before);
    await expectLedgerInvariants(t.db);

    const replay = await t.call('POST', '/intents', { user: 1, body });
    expect(replay.statusCode).toBe(200);
    expect(replay.json().status).toBe('FAILED');
    const { intentId } = replay.json();
    await until(() => tap.statusesOf(intentId).length > 0);
    expect(tap.statusesOf(intentId)).toEqual(['FAILED']);
  });

  it('in a batch: each payment is retried alone, meets its own stored key, and is answered 201, not as a replay', async () => {
    lost.arm(2);
    const bodies = BATCH_PAYERS.map(() => intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2 }));
    const answers = await Promise.all(BATCH_PAYERS.map((payer, i) => t.call('POST', '/intents', { user: payer, body: bodies[i] })));
    expect(lost.armed, 'a batch of two or more met the lost answer').toBe(false);
    expect(answers.map((a) => `${a.statusCode} ${a.json().status}`)).toEqual(BATCH_PAYERS.map(() => '201 SETTLED'));
    const stored = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM intents WHERE idempotency_key = ANY($1::uuid[])', [
      bodies.map((b) => b.idempotencyKey),
    ]);
    expect(stored.rows[0]?.n).toBe(BATCH_PAYERS.length);
    await expectLedgerInvariants(t.db);
  });
});

describe('logs', () => {
  it('carry the intent id as traceId on payment lines, and never a secret or a signature', async () => {
    const res = await t.call('POST', '/intents', {
      user: 1,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2 }),
    });
    const { intentId } = res.json();
    const mine = logLines.filter((line) => line.traceId === intentId);
    // One line per payment at info: its access line, on completion, naming the request and what became of the payment.
    expect(mine.map((line) => line.msg)).toEqual(['request completed']);
    expect(mine[0]).toMatchObject({
      req: { method: 'POST', url: '/intents' },
      res: { statusCode: 201 },
      intent: { status: 'SETTLED', channel: 'INTERNAL_P2P', operationType: 'P2P_TRANSFER', amount: '100' },
    });
    expect(logLines.filter((line) => line.msg === 'incoming request')).toEqual([]);
    const text = JSON.stringify(logLines);
    for (const secret of Object.values(t.config.file.secrets).flat()) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/[0-9a-f]{64}/);
  });
});

describe('a failure before its COMMIT was sent', () => {
  it('is answered 503 with Retry-After at once (docs/rules.md R66), without looking for a payment it cannot have stored', async () => {
    const before = await balances(t, ['user.1.THB', 'user.2.THB']);
    gone.arm();
    const res = await t
      .call('POST', '/intents', { user: 1, body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2 }) })
      .finally(() => gone.end());
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toEqual({ error: 'SERVICE_UNAVAILABLE', message: expect.any(String) });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Its transaction met the outage at BEGIN; a lookup of its key would have waited up to a
    // second on a database that is gone, to find nothing.
    expect(gone.asked).toEqual(['BEGIN']);
    expect(await balances(t, ['user.1.THB', 'user.2.THB'])).toEqual(before);
    await expectLedgerInvariants(t.db);
  });
});
