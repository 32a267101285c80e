import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPspxClient, type PspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { bangkokSettlementDate } from '../../src/adapters/pspx/pspx-simulator.js';
import type { OutboxWorker } from '../../src/workers/outbox-worker.js';
import { createPspWorker, type PspWorker } from '../../src/workers/psp-worker.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { demoConfigFile, startTestApp, type TestApp } from '../support/app.js';
import { feedCaughtUp } from '../support/feed.js';
import { balanceOf, expectLedgerInvariants } from '../support/invariants.js';
import { createUser, topUp } from '../support/payments.js';
import {
  captureLogger,
  CREATED_TRAIL,
  drain,
  eventsOf,
  intentOf,
  payout,
  registerIpps,
  testOutbox,
  testPspSettings,
  trailOf,
} from '../support/workers.js';

const PRE_FEE = 700n;
const POST_FEE = 300n;
const USER = 'user.601.THB';
const NOSTRO = 'system.nostro.pspx.THB';
const TRANSIT = 'system.transit.PSPX.THB';
const REVENUE = 'system.revenue.THB';

let t: TestApp;
let client: PspxClient;
let psp: PspWorker;
let outbox: OutboxWorker;
const log = captureLogger();

beforeAll(async () => {
  const demo = demoConfigFile();
  const file = {
    ...demo,
    feeRules: [
      ...(demo.feeRules ?? []),
      {
        name: 'payout fee',
        operationType: 'PSPX_WITHDRAWAL' as const,
        expression: `[{account: '${REVENUE}', amount: ${PRE_FEE}}]`,
        timing: 'PRE' as const,
      },
      {
        name: 'qr fee',
        operationType: 'THAI_QR_PAY' as const,
        expression: `[{account: '${REVENUE}', amount: ${POST_FEE}}]`,
        timing: 'POST' as const,
      },
    ],
  };
  // 200 ms: a held confirm (9998, 9997) becomes a real client-side time-out quickly.
  t = await startTestApp({ file, pspx: { timeoutMs: 200 } });
  client = createPspxClient({ baseUrl: t.pspxSimulator.url, timeoutMs: 200, backoffBaseMs: 1, backoffCapMs: 5 });
  psp = createPspWorker({ db: t.db, pspx: client, log, settings: testPspSettings });
  outbox = testOutbox(t, log);
  await createUser(t, 601);
  await registerIpps(t, 601);
  await topUp(t, 601, 10_000_000);
});
afterAll(async () => {
  await outbox?.stop();
  await t?.close();
});
afterEach(async () => expectLedgerInvariants(t.db));

const sim = () => t.pspxSimulator.simulator;
const snapshot = async () => ({
  user: await balanceOf(t.db, USER),
  nostro: await balanceOf(t.db, NOSTRO),
  transit: await balanceOf(t.db, TRANSIT),
  revenue: await balanceOf(t.db, REVENUE),
  partner: sim().balance,
});

async function pspColumns(intentId: string) {
  const { rows } = await t.db.query<{ psp_state: string; settlement_date: string | null; psp_inquiries: number }>(
    'SELECT psp_state, settlement_date, psp_inquiries FROM intents WHERE id = $1',
    [intentId],
  );
  return rows[0];
}

/** The test's client with another confirm: what the provider or the worker does to that one call. */
const withConfirm = (confirm: PspxClient['confirm']): PspxClient => ({
  registerWallet: (key, data) => client.registerWallet(key, data),
  inquiry: (intentId, amount, receiver) => client.inquiry(intentId, amount, receiver),
  confirm,
  statusInquiry: (intentId) => client.statusInquiry(intentId),
  partnerBalance: () => client.partnerBalance(),
  statement: (date, sink) => client.statement(date, sink),
});

/** Runs the worker `times` times, making the payout due again after each run (its inquiry delay skipped). */
async function askRepeatedly(worker: PspWorker, intentId: string, times: number) {
  for (let i = 0; i < times; i += 1) {
    await worker.runOnce();
    await t.db.query('UPDATE intents SET psp_next_at = now() WHERE id = $1 AND psp_lease_owner IS NULL', [intentId]);
  }
}

/** docs/rules.md R65: FAILED confirm_not_received straight from INQUIRING, nothing paid, every balance as before. */
async function expectConfirmNotReceived(intentId: string, before: Awaited<ReturnType<typeof snapshot>>) {
  expect(await intentOf(t, intentId)).toMatchObject({ status: 'FAILED', failureReason: 'confirm_not_received' });
  expect((await trailOf(t, intentId)).slice(-4)).toEqual([
    ['QUERIED', 'CONFIRM_PENDING'],
    ['CONFIRM_PENDING', 'INQUIRING'],
    ['INQUIRING', 'FAILED'],
    ['AUTHORIZED', 'FAILED'],
  ]);
  expect(sim().confirmsReceived(intentId)).toBe(0);
  expect(await snapshot()).toEqual(before);
}

describe('PSP worker and outbox over HTTP against the simulator', () => {
  it('success: NEW → … → CONFIRMED, then the outbox settles; one confirm; settlementDate stored; exact balances', async () => {
    const before = await snapshot();
    const id = await payout(t, 601, '0812341234', 5000);
    await drain(psp, outbox);

    expect(await intentOf(t, id)).toMatchObject({ status: 'SETTLED', failureReason: null });
    expect(await trailOf(t, id)).toEqual([
      ...CREATED_TRAIL,
      ['NEW', 'QUERY_PENDING'],
      ['QUERY_PENDING', 'QUERIED'],
      ['QUERIED', 'CONFIRM_PENDING'],
      ['CONFIRM_PENDING', 'CONFIRMED'],
      ['AUTHORIZED', 'SETTLED'],
    ]);
    expect(sim().confirmsReceived(id)).toBe(1);
    expect(sim().payoutsMade(id)).toBe(1);
    expect(await pspColumns(id)).toMatchObject({ psp_state: 'CONFIRMED', settlement_date: bangkokSettlementDate() });
    const after = await snapshot();
    expect({
      user: after.user - before.user,
      nostro: after.nostro - before.nostro,
      revenue: after.revenue - before.revenue,
      transit: after.transit,
      partner: after.partner - before.partner,
    }).toEqual({ user: -(5000n + PRE_FEE), nostro: 5000n, revenue: PRE_FEE, transit: 0n, partner: -5000n });

    const history = await t.call('GET', `/accounts/${USER}/transactions`);
    expect(history.json().transactions[0]).toMatchObject({ intentId: id, direction: 'DEBIT', amount: '5000', feeAmount: String(PRE_FEE) });
  });

  it('a POST fee is kept from the payout: the provider pays amount − postFee, which is what the nostro is credited', async () => {
    const before = await snapshot();
    const id = await payout(t, 601, '0812342222', 10_000, { operationType: 'THAI_QR_PAY' });
    await drain(psp, outbox);
    expect((await intentOf(t, id)).status).toBe('SETTLED');
    const after = await snapshot();
    expect({
      user: after.user - before.user,
      nostro: after.nostro - before.nostro,
      revenue: after.revenue - before.revenue,
      partner: after.partner - before.partner,
    }).toEqual({
      user: -10_000n,
      nostro: 10_000n - POST_FEE,
      revenue: POST_FEE,
      partner: -(10_000n - POST_FEE),
    });
  });

  it('a live intent gets its SETTLED status message from the outbox', async () => {
    const id = await payout(t, 601, '0812347777', 600, { live: true });
    const received: Array<{ intentId: string; status: string }> = [];
    const stop = await t.broker.subscribe(`intent.${id}`, (message) => received.push(JSON.parse(message)));
    try {
      await drain(psp, outbox);
      const settled = () => received.filter((message) => message.status === 'SETTLED');
      for (let waited = 0; settled().length === 0 && waited < 2000; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20));
      // Creation's own messages (fire-and-forget) may still trail in through Redis; the outbox adds SETTLED once.
      expect(settled()).toEqual([{ intentId: id, status: 'SETTLED', updatedAt: expect.any(String) }]);
    } finally {
      await stop();
    }
  });

  it('rejected inquiry (9999): QUERY_PENDING → FAILED, the outbox fails the intent and releases the reservation; no confirm', async () => {
    const before = await snapshot();
    const id = await payout(t, 601, '0812349999', 4000);
    await drain(psp, outbox);

    expect(await intentOf(t, id)).toMatchObject({ status: 'FAILED', failureReason: 'receiver_rejected' });
    const events = await eventsOf(t, id);
    expect(events.map((e) => [e.statusFrom, e.statusTo])).toEqual([
      ...CREATED_TRAIL,
      ['NEW', 'QUERY_PENDING'],
      ['QUERY_PENDING', 'FAILED'],
      ['AUTHORIZED', 'FAILED'],
    ]);
    expect(events.slice(-2).map((e) => e.reason)).toEqual(['receiver_rejected', 'receiver_rejected']);
    expect(sim().confirmsReceived(id)).toBe(0);
    expect(await snapshot()).toEqual(before);
  });

  it('confirm time-out with a late success (9997): CONFIRM_PENDING → INQUIRING → CONFIRMED → SETTLED with one confirm', async () => {
    const before = await snapshot();
    const id = await payout(t, 601, '0812349997', 3000);
    await drain(psp, outbox);

    expect((await intentOf(t, id)).status).toBe('SETTLED');
    const events = await eventsOf(t, id);
    expect(events.map((e) => [e.statusFrom, e.statusTo])).toEqual([
      ...CREATED_TRAIL,
      ['NEW', 'QUERY_PENDING'],
      ['QUERY_PENDING', 'QUERIED'],
      ['QUERIED', 'CONFIRM_PENDING'],
      ['CONFIRM_PENDING', 'INQUIRING'],
      ['INQUIRING', 'CONFIRMED'],
      ['AUTHORIZED', 'SETTLED'],
    ]);
    expect(events[6]?.payload).toMatchObject({ confirmAnswer: 'timeout' });
    expect(sim().confirmsReceived(id)).toBe(1);
    expect(sim().payoutsMade(id)).toBe(1);
    expect((await pspColumns(id))?.settlement_date).toBe(bangkokSettlementDate());
    const after = await snapshot();
    expect([after.user - before.user, after.nostro - before.nostro, after.transit]).toEqual([-(3000n + PRE_FEE), 3000n, 0n]);
  });

  it('endless pending (9998): MANUAL_REVIEW after 5 inquiries with escalation data; resolve CONFIRMED → SETTLED', async () => {
    const before = await snapshot();
    const inquiriesBefore = sim().stats.statusInquiries;
    const id = await payout(t, 601, '0812349998', 2000);
    await drain(psp, outbox);

    expect((await intentOf(t, id)).status).toBe('MANUAL_REVIEW');
    expect(sim().stats.statusInquiries - inquiriesBefore).toBe(5);
    const events = await eventsOf(t, id);
    expect(events.map((e) => [e.statusFrom, e.statusTo])).toEqual([
      ...CREATED_TRAIL,
      ['NEW', 'QUERY_PENDING'],
      ['QUERY_PENDING', 'QUERIED'],
      ['QUERIED', 'CONFIRM_PENDING'],
      ['CONFIRM_PENDING', 'INQUIRING'],
      ['INQUIRING', 'MANUAL_REVIEW'],
    ]);
    const escalation = events.at(-1);
    expect(escalation?.reason).toBe('psp_inquiries_exhausted');
    expect(escalation?.payload).toEqual({
      inquiries: 5,
      lastAnswer: 'pending',
      inquiryRef: expect.stringMatching(/^INQ-/),
      amount: '2000',
      preFeeAmount: String(PRE_FEE),
      postFeeAmount: '0',
      payoutAmount: '2000',
      currency: 'THB',
      receiver: { receiverType: 'MSISDN', receiverAccount: '0812349998' },
    });
    expect(log.events('manual_review_required').filter((line) => line.bindings.traceId === id)).toHaveLength(1);
    // The reservation is still held while an operator decides.
    expect((await snapshot()).transit - before.transit).toBe(0n);

    // The admin bearer token (docs/rules.md R11), unsigned.
    const resolved = await t.app.inject({
      method: 'POST',
      url: `/admin/intents/${id}/resolve`,
      headers: { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' },
      payload: JSON.stringify({ resolution: 'CONFIRMED' }),
    });
    expect(resolved.statusCode, resolved.body).toBe(200);
    expect(resolved.json()).toEqual({
      intentId: id,
      previousStatus: 'MANUAL_REVIEW',
      status: 'MANUAL_REVIEW',
      resolution: 'CONFIRMED',
      queuedJob: 'post_pending',
    });
    await drain(psp, outbox);

    expect((await intentOf(t, id)).status).toBe('SETTLED');
    const last = (await eventsOf(t, id)).at(-1);
    expect([last?.statusFrom, last?.statusTo, last?.payload]).toEqual([
      'MANUAL_REVIEW',
      'SETTLED',
      { resolution: 'CONFIRMED', resolvedBy: 'admin-token' },
    ]);
    expect(sim().confirmsReceived(id)).toBe(1);
    const after = await snapshot();
    expect([after.user - before.user, after.nostro - before.nostro, after.transit]).toEqual([-(2000n + PRE_FEE), 2000n, 0n]);
    // The event feed (docs/EVENTS.md) has the status changes only: the worker's sub-state moves stay
    // in the audit log, and the escalation enters it as AUTHORIZED → MANUAL_REVIEW.
    await feedCaughtUp(t.db);
    const feed = (await t.call('GET', '/events?limit=500')).json().events as Array<{
      intentId: string;
      statusFrom: string | null;
      statusTo: string;
    }>;
    expect(feed.filter((e) => e.intentId === id).map((e) => [e.statusFrom, e.statusTo])).toEqual([
      ...CREATED_TRAIL,
      ['AUTHORIZED', 'MANUAL_REVIEW'],
      ['MANUAL_REVIEW', 'SETTLED'],
    ]);
  });

  it('endless pending (9998): resolve FAILED fails it at once with the reason, and the outbox releases the reservation', async () => {
    const before = await snapshot();
    const id = await payout(t, 601, '0812359998', 2500);
    await drain(psp, outbox);
    expect((await intentOf(t, id)).status).toBe('MANUAL_REVIEW');

    const resolved = await t.call('POST', `/admin/intents/${id}/resolve`, {
      service: 'admin-tool',
      body: { resolution: 'FAILED', reason: 'provider says not paid' },
    });
    expect(resolved.statusCode, resolved.body).toBe(200);
    expect(resolved.json()).toEqual({
      intentId: id,
      previousStatus: 'MANUAL_REVIEW',
      status: 'FAILED',
      resolution: 'FAILED',
      queuedJob: 'void_pending',
    });
    expect(await intentOf(t, id)).toMatchObject({ status: 'FAILED', failureReason: 'provider says not paid' });
    await drain(psp, outbox);

    const trail = await trailOf(t, id);
    expect(trail.slice(-2)).toEqual([
      ['INQUIRING', 'MANUAL_REVIEW'],
      ['MANUAL_REVIEW', 'FAILED'],
    ]);
    const { rows } = await t.db.query('SELECT 1 FROM outbox WHERE intent_id = $1 AND done_at IS NULL', [id]);
    expect(rows).toHaveLength(0);
    expect(await snapshot()).toEqual(before);
  });

  it('a worker that stopped after recording CONFIRM_PENDING is resumed with status inquiries only, never a second confirm', async () => {
    let confirmsSent = 0;
    // The confirm "crashes" the worker after it left: the provider got it, the worker never saw the answer.
    const crashing = withConfirm(async (id, ref) => {
      confirmsSent += 1;
      await client.confirm(id, ref);
      throw new Error('process died');
    });
    const dying = createPspWorker({ db: t.db, pspx: crashing, log, settings: testPspSettings });
    const id = await payout(t, 601, '0812343333', 1500);
    expect(await dying.runOnce()).toBe(1);
    expect((await pspColumns(id))?.psp_state).toBe('CONFIRM_PENDING');

    await drain(dying, outbox);
    expect((await intentOf(t, id)).status).toBe('SETTLED');
    expect(confirmsSent).toBe(1);
    expect(sim().confirmsReceived(id)).toBe(1);
    expect((await trailOf(t, id)).slice(-4)).toEqual([
      ['QUERIED', 'CONFIRM_PENDING'],
      ['CONFIRM_PENDING', 'INQUIRING'],
      ['INQUIRING', 'CONFIRMED'],
      ['AUTHORIZED', 'SETTLED'],
    ]);
  });

  it('a worker that died in CONFIRM_PENDING before its confirm left: not_found past twice the time-out fails it confirm_not_received, money back, no MANUAL_REVIEW (docs/rules.md R65)', async () => {
    const before = await snapshot();
    const diedBeforeSending = withConfirm(async () => Promise.reject(new Error('process died')));
    const settings = { ...testPspSettings, confirmNotReceivedAfterMs: 400 };
    const dying = createPspWorker({ db: t.db, pspx: diedBeforeSending, log, settings });
    const id = await payout(t, 601, '0812344444', 2500);
    expect(await dying.runOnce()).toBe(1);
    expect((await pspColumns(id))?.psp_state).toBe('CONFIRM_PENDING');

    // The restarted worker asks at once, many times: every not_found within the span only waits, never escalates.
    const restarted = createPspWorker({ db: t.db, pspx: client, log, settings });
    await askRepeatedly(restarted, id, 8);
    expect((await intentOf(t, id)).status).toBe('AUTHORIZED');
    await new Promise((r) => setTimeout(r, 450));
    await t.db.query('UPDATE intents SET psp_next_at = now() WHERE id = $1 AND psp_lease_owner IS NULL', [id]);
    await drain(restarted, outbox);

    await expectConfirmNotReceived(id, before);
  });

  it('a confirm the provider answered 503 (turned away before processing): not_found past twice the time-out fails it confirm_not_received, money back, no MANUAL_REVIEW (docs/rules.md R65)', async () => {
    const before = await snapshot();
    const turnedAway = withConfirm(async (intentId, ref) => {
      // The simulator's injected 503 is answered on arrival, before the confirm is looked at.
      sim().failNext(1);
      return client.confirm(intentId, ref);
    });
    // The span of R65 as seen by two workers: one asking well within it, one after it has passed
    // (its span 0), so that a loaded machine's slowness cannot move the test across it.
    const withinSpan = createPspWorker({
      db: t.db,
      pspx: turnedAway,
      log,
      settings: { ...testPspSettings, confirmNotReceivedAfterMs: 600_000 },
    });
    const id = await payout(t, 601, '0812345555', 3500);
    // Asked many times (more than inquiriesMax): every not_found within the span only waits.
    await askRepeatedly(withinSpan, id, testPspSettings.inquiriesMax + 3);
    expect((await intentOf(t, id)).status).toBe('AUTHORIZED');
    expect(await pspColumns(id)).toMatchObject({ psp_state: 'INQUIRING', psp_inquiries: 0 });
    const afterSpan = createPspWorker({ db: t.db, pspx: turnedAway, log, settings: { ...testPspSettings, confirmNotReceivedAfterMs: 0 } });
    await drain(afterSpan, outbox);

    await expectConfirmNotReceived(id, before);
  });

  it('a confirm the open circuit breaker never sent: not_found past the span fails it confirm_not_received, money back (docs/rules.md R65)', async () => {
    const before = await snapshot();
    const breakerOpen = withConfirm(async (intentId) => ({
      kind: 'unknown',
      cause: 'circuit_open',
      detail: `PSPX circuit open; /v1/payouts/${intentId}/confirm not sent`,
    }));
    const worker = createPspWorker({ db: t.db, pspx: breakerOpen, log, settings: { ...testPspSettings, confirmNotReceivedAfterMs: 0 } });
    const id = await payout(t, 601, '0812347777', 1700);
    await drain(worker, outbox);

    await expectConfirmNotReceived(id, before);
  });

  it('a confirm answered 500 is not proof: its not_found answers count towards MANUAL_REVIEW, as after a time-out', async () => {
    const before = await snapshot();
    const failing500 = withConfirm(async (intentId) => ({
      kind: 'unknown',
      cause: 'http_5xx',
      detail: `POST /v1/payouts/${intentId}/confirm answered 500`,
      httpStatus: 500,
    }));
    // Even with R65's span long passed (0), a not_found after a 500 is no proof.
    const settings = { ...testPspSettings, confirmNotReceivedAfterMs: 0 };
    const worker = createPspWorker({ db: t.db, pspx: failing500, log, settings });
    const id = await payout(t, 601, '0812346666', 1200);
    await askRepeatedly(worker, id, testPspSettings.inquiriesMax + 3);
    expect((await intentOf(t, id)).status).toBe('MANUAL_REVIEW');
    expect(sim().confirmsReceived(id)).toBe(0);
    // An operator resolves it as the provider says (never paid): the money comes back.
    const resolved = await t.call('POST', `/admin/intents/${id}/resolve`, {
      service: 'admin-tool',
      body: { resolution: 'FAILED', reason: 'provider never received the confirm' },
    });
    expect(resolved.statusCode, resolved.body).toBe(200);
    await drain(worker, outbox);
    expect((await intentOf(t, id)).status).toBe('FAILED');
    expect(await snapshot()).toEqual(before);
  });

  it('two workers running at once never drive one intent together: one confirm each, one trail each', async () => {
    const other = createPspWorker({ db: t.db, pspx: client, log, settings: testPspSettings });
    const ids: string[] = [];
    // One after the other: docs/rules.md R22 refuses a second payment of one payer while the first is being created.
    for (let n = 0; n < 6; n += 1) ids.push(await payout(t, 601, `08123450${n}0`, 1000 + n));
    sim().setDelayMs(20);
    try {
      for (let round = 0; round < 10; round += 1) await Promise.all([psp.runOnce(), other.runOnce()]);
    } finally {
      sim().setDelayMs(0);
    }
    await drain(psp, outbox);
    for (const id of ids) {
      expect((await intentOf(t, id)).status).toBe('SETTLED');
      expect(sim().confirmsReceived(id)).toBe(1);
      expect((await trailOf(t, id)).filter(([, to]) => to === 'CONFIRM_PENDING')).toHaveLength(1);
    }
  });

  it('a reservation that expired before the outbox posted it ends FAILED pending_expired (docs/rules.md R23)', async () => {
    const before = await snapshot();
    const id = await payout(t, 601, '0812344444', 1200);
    while ((await psp.runOnce()) > 0);
    expect((await pspColumns(id))?.psp_state).toBe('CONFIRMED');
    await t.db.query(
      "UPDATE ledger_transfers SET expires_at = now() - interval '1 second' WHERE id = (SELECT transfer_ids[1] FROM intents WHERE id = $1)",
      [id],
    );

    const run = await outbox.runOnce();
    expect(run).toMatchObject({ leader: true, jobsDone: 1, expired: 1 });
    expect(await intentOf(t, id)).toMatchObject({ status: 'FAILED', failureReason: 'pending_expired' });
    expect(log.events('pending_expired').filter((line) => line.bindings.traceId === id)).toHaveLength(1);
    const after = await snapshot();
    // The ledger released the user's money; the provider paid: that is what the error log is for.
    expect([after.user - before.user, after.transit]).toEqual([0n, 0n]);
  });

  it('payouts settled together: one the ledger refuses is retried alone, the others settle in the same batch, each exactly once', async () => {
    const before = await snapshot();
    const ids: string[] = [];
    for (let n = 0; n < 5; n += 1) ids.push(await payout(t, 601, `081235000${n}`, 2000 + n));
    while ((await psp.runOnce()) > 0);
    for (const id of ids) expect((await pspColumns(id))?.psp_state).toBe('CONFIRMED');
    const victim = ids[2] as string;
    // The victim's chain names a reservation that does not exist on its first two attempts: the
    // ledger refuses that chain alone (pending_transfer_not_found), inside the batch and then in
    // its own retry, as a fault in one payout's data would.
    let refusalsLeft = 2;
    const ledgerCalls: string[][] = [];
    const refusing: Ledger = {
      createAccounts: (sql, accounts) => t.ledger.createAccounts(sql, accounts),
      lookupAccounts: (sql, accountIds) => t.ledger.lookupAccounts(sql, accountIds),
      lookupTransfers: (sql, transferIds) => t.ledger.lookupTransfers(sql, transferIds),
      expirePendingTransfers: (sql, batchSizeMax) => t.ledger.expirePendingTransfers(sql, batchSizeMax),
      createTransfers: (sql, transfers) => {
        ledgerCalls.push([...new Set(transfers.map((transfer) => transfer.userData128 ?? ''))]);
        if (refusalsLeft === 0 || !transfers.some((transfer) => transfer.userData128 === victim))
          return t.ledger.createTransfers(sql, transfers);
        refusalsLeft -= 1;
        return t.ledger.createTransfers(
          sql,
          transfers.map((transfer) =>
            transfer.userData128 === victim && transfer.pendingId !== undefined ? { ...transfer, pendingId: randomUUID() } : transfer,
          ),
        );
      },
    };
    await outbox.stop();
    const batching = testOutbox(t, log, refusing);
    try {
      const first = await batching.runOnce();
      expect(first).toMatchObject({ leader: true, jobsDone: 4, jobsFailed: 1 });
      // One ledger call for all five, then the victim's own.
      expect(ledgerCalls.map((intents) => intents.length)).toEqual([5, 1]);
      expect(new Set(ledgerCalls[0])).toEqual(new Set(ids));
      for (const id of ids) expect((await intentOf(t, id)).status).toBe(id === victim ? 'AUTHORIZED' : 'SETTLED');
      const { rows: jobs } = await t.db.query<{ attempts: number; last_error: string | null; done: boolean }>(
        "SELECT attempts, last_error, done_at IS NOT NULL AS done FROM outbox WHERE intent_id = $1 AND kind = 'post_pending'",
        [victim],
      );
      expect(jobs).toHaveLength(1);
      expect(jobs[0]).toMatchObject({ attempts: 1, done: false });
      expect(jobs[0]?.last_error).toContain('pending_transfer_not_found');
      await expectLedgerInvariants(t.db);

      // Its backoff is a millisecond or two here: the next run settles it.
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await batching.runOnce()).toMatchObject({ jobsDone: 1, jobsFailed: 0 });
    } finally {
      await batching.stop();
      outbox = testOutbox(t, log);
    }
    const total = ids.reduce((sum, _id, n) => sum + 2000n + BigInt(n) + PRE_FEE, 0n);
    for (const id of ids) {
      expect(await intentOf(t, id)).toMatchObject({ status: 'SETTLED', failureReason: null });
      const trail = await trailOf(t, id);
      // CONFIRMED by the confirm's answer or, when the short test time-out cut it, by an inquiry.
      expect(trail.at(-2)?.[1]).toBe('CONFIRMED');
      expect(trail.at(-1)).toEqual(['AUTHORIZED', 'SETTLED']);
      expect(trail.filter(([, to]) => to === 'SETTLED')).toHaveLength(1);
      const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM transactions WHERE intent_id = $1', [id]);
      expect(rows[0]?.n).toBe(2);
    }
    const after = await snapshot();
    expect([after.user - before.user, after.revenue - before.revenue, after.transit]).toEqual([-total, 5n * PRE_FEE, 0n]);
  });
});

describe('POST /admin/intents/{id}/resolve errors', () => {
  const resolve = (id: string, body: unknown, options: { service?: string; headers?: Record<string, string>; scheme?: 'message' } = {}) =>
    t.call('POST', `/admin/intents/${id}/resolve`, { body, ...options });

  it('401 without a signature or with a wrong bearer token', async () => {
    const unsigned = await t.app.inject({
      method: 'POST',
      url: `/admin/intents/${randomUUID()}/resolve`,
      payload: { resolution: 'FAILED' },
    });
    expect(unsigned.statusCode).toBe(401);
    const wrongToken = await t.app.inject({
      method: 'POST',
      url: `/admin/intents/${randomUUID()}/resolve`,
      headers: { authorization: 'Bearer nope', 'content-type': 'application/json' },
      payload: JSON.stringify({ resolution: 'FAILED' }),
    });
    expect(wrongToken.statusCode).toBe(401);
    expect(wrongToken.json().error).toBe('UNAUTHORIZED');
  });

  it('403 for a key without forceResolve or admin', async () => {
    const res = await resolve(randomUUID(), { resolution: 'FAILED' }, { service: 'wallet-api' });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('FORBIDDEN');
  });

  it('404 NOT_FOUND for an unknown intent; 422 VALIDATION_ERROR for a bad body', async () => {
    const missing = await resolve(randomUUID(), { resolution: 'FAILED' }, { service: 'admin-tool' });
    expect([missing.statusCode, missing.json().error]).toEqual([404, 'NOT_FOUND']);
    const bad = await resolve(randomUUID(), { resolution: 'MAYBE' }, { service: 'admin-tool' });
    expect([bad.statusCode, bad.json().error]).toEqual([422, 'VALIDATION_ERROR']);
  });

  it('422 WRONG_STATUS for an intent that is not in MANUAL_REVIEW (an AUTHORIZED payout in flight)', async () => {
    const id = await payout(t, 601, '0812345555', 900);
    const res = await resolve(id, { resolution: 'CONFIRMED' }, { service: 'admin-tool' });
    expect([res.statusCode, res.json().error]).toEqual([422, 'WRONG_STATUS']);
    await drain(psp, outbox);
    expect((await intentOf(t, id)).status).toBe('SETTLED');
  });

  it('200 with previousStatus and no side effect on SETTLED and FAILED intents (any service’s intent, docs/rules.md R35)', async () => {
    const settled = await payout(t, 601, '0812346666', 800);
    const failed = await payout(t, 601, '0812369999', 800);
    await drain(psp, outbox);
    const before = await snapshot();
    for (const [id, status] of [
      [settled, 'SETTLED'],
      [failed, 'FAILED'],
    ] as const) {
      const trail = await trailOf(t, id);
      for (const resolution of ['CONFIRMED', 'FAILED']) {
        const res = await resolve(id, { resolution }, { service: 'admin-tool' });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json()).toEqual({ intentId: id, previousStatus: status, status, resolution, queuedJob: null });
      }
      expect(await trailOf(t, id)).toEqual(trail);
    }
    const { rows } = await t.db.query('SELECT 1 FROM outbox WHERE intent_id = ANY($1::uuid[]) AND done_at IS NULL', [[settled, failed]]);
    expect(rows).toHaveLength(0);
    expect(await snapshot()).toEqual(before);
  });

  it('a CONFIRMED resolution waiting in the outbox: CONFIRMED again is a replay, FAILED is 409 CONFLICT', async () => {
    const id = await payout(t, 601, '0812379998', 700);
    await drain(psp, outbox);
    expect((await intentOf(t, id)).status).toBe('MANUAL_REVIEW');
    const first = await resolve(id, { resolution: 'CONFIRMED' }, { service: 'admin-tool' });
    // Signed afresh: the same signed request again would be refused as a replay (docs/SECURITY.md §3).
    const again = await resolve(id, { resolution: 'CONFIRMED' }, { service: 'admin-tool', scheme: 'message' });
    expect([first.statusCode, again.statusCode]).toEqual([200, 200]);
    expect(again.json()).toMatchObject({ status: 'MANUAL_REVIEW', queuedJob: 'post_pending' });
    const late = await resolve(id, { resolution: 'FAILED' }, { service: 'admin-tool' });
    expect([late.statusCode, late.json().error]).toEqual([409, 'CONFLICT']);
    const { rows } = await t.db.query<{ n: bigint }>(
      "SELECT count(*)::bigint AS n FROM outbox WHERE intent_id = $1 AND kind = 'post_pending'",
      [id],
    );
    expect(rows[0]?.n).toBe(1n);
    await drain(psp, outbox);
    expect((await intentOf(t, id)).status).toBe('SETTLED');
  });
});
