/**
 * Reconciliation of today's Bangkok date against a database of its own (docs/rules.md R59): the
 * books' movement of a day is the nostro's posted ledger transfers stamped inside it, and a payout
 * a person resolved CONFIRMED is expected on the statement of the day its resolution was booked.
 * Everything here is written to the ledger now, so the day under test is today, closed early at
 * the simulator.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bangkokSettlementDate, dayBefore } from '../../src/adapters/pspx/settlement-calendar.js';
import type { PspWorker } from '../../src/workers/psp-worker.js';
import type { OutboxWorker } from '../../src/workers/outbox-worker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { balanceOf, expectLedgerInvariants } from '../support/invariants.js';
import { captureLogger, drain, intentOf, payout, payoutPayer, payoutWorkers } from '../support/workers.js';

const USER = 7410;
const TOP_UP = 10_000_000;
const NOSTRO = 'system.nostro.pspx.THB';
const ADMIN = { authorization: 'Bearer test-admin-token' };

let t: TestApp;
let psp: PspWorker;
let outbox: OutboxWorker;
let today: string;
const log = captureLogger();

beforeAll(async () => {
  t = await startTestApp({ pspx: { timeoutMs: 300, backoffBaseMs: 1, backoffCapMs: 5 } });
  ({ psp, outbox } = payoutWorkers(t, log, 300));
  // A QR top-up: money the provider received for the user, so it leaves the nostro (debits it) today.
  await payoutPayer(t, USER, TOP_UP);
  today = bangkokSettlementDate();
  sim().statements.plant({ date: today, close: true });
});
afterAll(async () => {
  await outbox?.stop();
  await t?.close();
});
afterEach(async () => {
  await expectLedgerInvariants(t.db);
});

const sim = () => t.pspxSimulator.simulator;

async function run(date: string) {
  const res = await t.app.inject({ method: 'POST', url: '/admin/reconciliation/runs', headers: ADMIN, payload: { date } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

/** Payouts the provider pays today, settled through the PSP and outbox workers. */
async function paidToday(amounts: readonly number[]): Promise<string[]> {
  const ids: string[] = [];
  for (const amount of amounts) ids.push(await payout(t, USER, '0812345678', amount));
  await drain(psp, outbox);
  for (const id of ids) expect((await intentOf(t, id)).status).toBe('SETTLED');
  return ids;
}

/** A payout whose confirm times out and whose every inquiry answers pending: MANUAL_REVIEW, its reservation held. */
async function inReview(amount: number, receiver: string): Promise<string> {
  const id = await payout(t, USER, receiver, amount);
  await drain(psp, outbox);
  expect((await intentOf(t, id)).status).toBe('MANUAL_REVIEW');
  return id;
}

const breaksOf = (runBody: { breaks: Array<{ intentId: string | null }> }, intentId: string) =>
  runBody.breaks.filter((found) => found.intentId === intentId);

describe("the books' movement of a day", () => {
  it("is the nostro's posted ledger transfers of the Bangkok day, set against the provider's", async () => {
    await paidToday([1000, 2500, 40_000]);
    const first = await run(today);
    // The statement has the three payouts; the books also moved the top-up the statement lacks.
    expect(first).toMatchObject({ status: 'BREAKS', matched: 3, breakCount: 0, providerMovement: '-43500' });
    expect(first.nostroMovement).toBe(String(TOP_UP - 43_500));
    // Everything this database ever booked on the nostro was booked today: the day's movement is its whole balance.
    expect(BigInt(first.nostroMovement)).toBe(-(await balanceOf(t.db, NOSTRO)));
    // No break kind counts it, so the metric an alert reads says the movements differ.
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain(`payorch_reconciliation_movement_difference ${-TOP_UP}\n`);

    // The provider shows the top-up as a credit of its own: the movements agree, the line is the provider's own.
    sim().statements.plant({ date: today, addLine: { type: 'ADJUSTMENT', amount: String(TOP_UP) } });
    const second = await run(today);
    expect(second).toMatchObject({ status: 'BREAKS', matched: 3, breakCount: 1, providerMovement: String(TOP_UP - 43_500) });
    expect(second.nostroMovement).toBe(second.providerMovement);
    expect(second.breaks).toEqual([
      { kind: 'UNKNOWN_LINE', intentId: null, lineId: expect.any(String), amountHere: null, amountAtProvider: String(TOP_UP) },
    ]);
  });

  it('another day, whose books hold none of these postings, moved nothing', async () => {
    // Yesterday is over, so the provider has closed it.
    expect(await run(dayBefore(today))).toMatchObject({ nostroMovement: '0', providerMovement: '0', status: 'BALANCED' });
  });
});

describe('a payout a person resolved CONFIRMED', () => {
  let confirmed: string;

  beforeAll(async () => {
    confirmed = await inReview(3000, '0800009998');
    const res = await t.app.inject({
      method: 'POST',
      url: `/admin/intents/${confirmed}/resolve`,
      headers: ADMIN,
      payload: { resolution: 'CONFIRMED', reason: 'provider confirmed by phone' },
    });
    expect(res.statusCode, res.body).toBe(200);
    await drain(psp, outbox);
    expect((await intentOf(t, confirmed)).status).toBe('SETTLED');
  });

  it('is MISSING_AT_PROVIDER, once, on the day its resolution was booked when the statement lacks it', async () => {
    const nostroBefore = await balanceOf(t.db, NOSTRO);
    const res = await run(today);
    expect(breaksOf(res, confirmed)).toEqual([
      { kind: 'MISSING_AT_PROVIDER', intentId: confirmed, lineId: null, amountHere: '3000', amountAtProvider: null },
    ]);
    // The books count it on that day: the nostro received it when it was resolved.
    expect(BigInt(res.nostroMovement)).toBe(-nostroBefore);
    // Not on the day before, whose books do not hold it.
    expect(breaksOf(await run(dayBefore(today)), confirmed)).toEqual([]);
  });

  it('is matched when the statement of that day has it', async () => {
    const without = await run(today);
    sim().statements.plant({ date: today, addLine: { type: 'PAYOUT', amount: '3000', intentId: confirmed } });
    const withLine = await run(today);
    expect(breaksOf(withLine, confirmed)).toEqual([]);
    expect(withLine.matched).toBe(without.matched + 1);
    expect(withLine.breakCount).toBe(without.breakCount - 1);
    expect(withLine.nostroMovement).toBe(withLine.providerMovement);
  });

  it("one the run resolved from another day's line is not expected again on the day it was booked", async () => {
    const byRun = await inReview(3200, '0833339998');
    const yesterday = dayBefore(today);
    sim().statements.plant({ date: yesterday, addLine: { type: 'PAYOUT', amount: '3200', intentId: byRun } });
    expect(await run(yesterday)).toMatchObject({ resolved: 1 });
    await drain(psp, outbox);
    expect((await intentOf(t, byRun)).status).toBe('SETTLED');
    const res = await run(today);
    expect(breaksOf(res, byRun)).toEqual([]);
    // Booked today, paid by the provider yesterday: the day's movements differ by it, which is why the day is not BALANCED.
    expect(BigInt(res.nostroMovement) - BigInt(res.providerMovement)).toBe(-3200n);
  });
});
