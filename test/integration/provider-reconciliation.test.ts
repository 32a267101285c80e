/**
 * Reconciliation with the provider (docs/rules.md R59) against the PSPX simulator: payouts paid
 * through the real worker path, the simulator's statement of their day with planted breaks, and
 * the run over HTTP. Not the startup sweep of stuck intents (reconciliation-and-balance.test.ts).
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createPayorchClient } from '@payorch/client';
import { EXIT, runCli } from '../../src/cli/main.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { bangkokSettlementDate } from '../../src/adapters/pspx/settlement-calendar.js';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import type { OutboxWorker } from '../../src/workers/outbox-worker.js';
import type { PspWorker } from '../../src/workers/psp-worker.js';
import { createStatementReconciliationWorker, dueStatementDate } from '../../src/workers/statement-reconciliation.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { balanceOf, expectLedgerInvariants } from '../support/invariants.js';
import { createUser, topUp } from '../support/payments.js';
import { captureLogger, drain, eventsOf, intentOf, payout, payoutWorkers, registerIpps } from '../support/workers.js';

const USER = 741;
const USER_ACCOUNT = `user.${USER}.THB`;
const NOSTRO = 'system.nostro.pspx.THB';
const ADMIN = { authorization: 'Bearer test-admin-token' };

let t: TestApp;
let psp: PspWorker;
let outbox: OutboxWorker;
const log = captureLogger();

beforeAll(async () => {
  // 300 ms: a held confirm (9998) becomes a real client-side time-out quickly.
  t = await startTestApp({ pspx: { timeoutMs: 300, backoffBaseMs: 1, backoffCapMs: 5 } });
  ({ psp, outbox } = payoutWorkers(t, log, 300));
  await createUser(t, USER);
  await registerIpps(t, USER);
  await topUp(t, USER, 50_000_000);
});
afterAll(async () => {
  await outbox?.stop();
  await t?.close();
});
afterEach(async () => {
  sim().setSettlementDate(null);
  await expectLedgerInvariants(t.db);
});

const sim = () => t.pspxSimulator.simulator;

async function post(date: unknown, headers: Record<string, string> = ADMIN) {
  return t.app.inject({ method: 'POST', url: '/admin/reconciliation/runs', headers, payload: { date } });
}

/** Payouts paid by the provider on `date`, through the PSP and outbox workers; their ids. */
async function paidOn(date: string, amounts: readonly number[], receiver = '0812345678'): Promise<string[]> {
  sim().setSettlementDate(date);
  const ids: string[] = [];
  for (const amount of amounts) ids.push(await payout(t, USER, receiver, amount));
  await drain(psp, outbox);
  for (const id of ids) expect((await intentOf(t, id)).status).toBe('SETTLED');
  return ids;
}

type Break = { kind: string; intentId: string | null; lineId: string | null; amountHere: string | null; amountAtProvider: string | null };
const sorted = (breaks: readonly Break[]) => [...breaks].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

describe('a clean statement', () => {
  // Its payouts were booked in the ledger today, not on its date: the books of that date moved
  // nothing, so the movements differ and the run is BREAKS with no break listed. Today's date, whose
  // books do hold what is paid, is reconciliation-ledger-day.test.ts.
  it('has every payout matched and no break; the books of its date moved nothing', async () => {
    const date = '20250101';
    await paidOn(date, [1000, 2500, 40_000]);
    const res = await post(date);
    expect(res.statusCode, res.body).toBe(201);
    const run = res.json();
    expect(run).toMatchObject({
      date,
      status: 'BREAKS',
      lineCount: 3,
      matched: 3,
      breakCount: 0,
      resolved: 0,
      breaks: [],
      providerMovement: '-43500',
      nostroMovement: '0',
      requestedBy: 'admin-token',
      nextBreaksAfter: null,
    });
    const one = await t.app.inject({ method: 'GET', url: `/admin/reconciliation/runs/${run.runId}`, headers: ADMIN });
    expect(one.statusCode).toBe(200);
    expect(one.json()).toEqual(run);
    const list = await t.app.inject({ method: 'GET', url: `/admin/reconciliation/runs?date=${date}`, headers: ADMIN });
    expect(list.statusCode).toBe(200);
    const { breaks: _breaks, nextBreaksAfter: _next, ...summary } = run;
    expect(list.json().runs).toEqual([summary]);
  });
});

describe('planted breaks', () => {
  const date = '20250102';
  let dropped: string;
  let changed: string;
  let failedHere: string;
  let matched: string;
  const stranger = randomUUID();

  beforeAll(async () => {
    [dropped, changed, matched] = (await paidOn(date, [1100, 1200, 1300])) as [string, string, string];
    // Rejected at inquiry: FAILED here, and (planted) paid there.
    failedHere = await payout(t, USER, '0800009999', 1400);
    await drain(psp, outbox);
    expect((await intentOf(t, failedHere)).status).toBe('FAILED');
    const plant = (request: Record<string, unknown>) => expect(sim().statements.plant({ date, ...request }).ok).toBe(true);
    plant({ dropIntentId: dropped });
    plant({ setAmount: { intentId: changed, amount: '1201' } });
    plant({ addLine: { type: 'PAYOUT', amount: '1400', intentId: failedHere } });
    plant({ addLine: { type: 'FEE', amount: '35' } });
    plant({ addLine: { type: 'PAYOUT', amount: '999', intentId: stranger } });
  });

  it('reports each break once with its kind, and leaves every intent as it was', async () => {
    const before = await Promise.all([dropped, changed, failedHere, matched].map((id) => intentOf(t, id)));
    const res = await post(date);
    expect(res.statusCode, res.body).toBe(201);
    const run = res.json();
    expect(run).toMatchObject({ status: 'BREAKS', matched: 1, breakCount: 5, lineCount: 5, resolved: 0 });
    expect(sorted(run.breaks)).toEqual(
      sorted([
        { kind: 'MISSING_AT_PROVIDER', intentId: dropped, lineId: null, amountHere: '1100', amountAtProvider: null },
        { kind: 'AMOUNT_MISMATCH', intentId: changed, lineId: expect.any(String), amountHere: '1200', amountAtProvider: '1201' },
        { kind: 'STATUS_MISMATCH', intentId: failedHere, lineId: expect.any(String), amountHere: '1400', amountAtProvider: '1400' },
        { kind: 'UNKNOWN_LINE', intentId: null, lineId: expect.any(String), amountHere: null, amountAtProvider: '35' },
        { kind: 'MISSING_HERE', intentId: stranger, lineId: expect.any(String), amountHere: null, amountAtProvider: '999' },
      ]),
    );
    // Nothing but a MANUAL_REVIEW payout is ever changed by a run.
    expect(await Promise.all([dropped, changed, failedHere, matched].map((id) => intentOf(t, id)))).toEqual(before);
    // The provider's movement counts its own lines; the books count the nostro's postings of the
    // date, and these payouts were posted today.
    expect(run.providerMovement).toBe(String(-(1201 + 1300 + 1400 + 35 + 999)));
    expect(run.nostroMovement).toBe('0');
  });

  it('answers the same breaks when the date is run again', async () => {
    const first = (await post(date)).json();
    const second = await post(date);
    expect(second.statusCode).toBe(201);
    expect(second.json().runId).not.toBe(first.runId);
    expect(sorted(second.json().breaks)).toEqual(sorted(first.breaks));
    expect(second.json()).toMatchObject({ status: 'BREAKS', matched: first.matched, breakCount: first.breakCount });
  });

  it('pages the breaks of a run with after', async () => {
    const run = (await post(date)).json();
    const page1 = (await t.app.inject({ method: 'GET', url: `/admin/reconciliation/runs/${run.runId}?limit=2`, headers: ADMIN })).json();
    expect(page1.breaks).toHaveLength(2);
    const page2 = (
      await t.app.inject({
        method: 'GET',
        url: `/admin/reconciliation/runs/${run.runId}?limit=10&after=${page1.nextBreaksAfter}`,
        headers: ADMIN,
      })
    ).json();
    expect(page2.nextBreaksAfter).toBeNull();
    expect(sorted([...page1.breaks, ...page2.breaks])).toEqual(sorted(run.breaks));
  });
});

describe('paging the breaks of a large run', () => {
  it('reads every break once, in the order found, however many digits their positions have', async () => {
    const date = '20250109';
    // 995 breaks: their positions cross from one digit count to the next wherever the run starts below 1000.
    const lineIds = Array.from({ length: 995 }, (_, n) => `PSPXL-PAGED-${String(n + 1).padStart(3, '0')}`);
    for (const lineId of lineIds) sim().statements.plant({ date, addLine: { type: 'FEE', amount: '10', lineId } });
    const run = (await post(date)).json();
    expect(run.breaks.map((found: Break) => found.lineId)).toEqual(lineIds);
    const paged: string[] = [];
    let after: string | null = null;
    do {
      const query: string = after === null ? '?limit=100' : `?limit=100&after=${after}`;
      const page = (await t.app.inject({ method: 'GET', url: `/admin/reconciliation/runs/${run.runId}${query}`, headers: ADMIN })).json();
      paged.push(...page.breaks.map((found: Break) => found.lineId));
      after = page.nextBreaksAfter;
    } while (after !== null);
    expect(paged).toEqual(lineIds);
  });
});

describe('a statement line never meets two payouts', () => {
  it('a second PAYOUT line for one payout is MISSING_HERE, never a second match', async () => {
    const date = '20250104';
    const [paid] = await paidOn(date, [2000]);
    sim().statements.plant({ date, addLine: { type: 'PAYOUT', amount: '2000', intentId: paid } });
    const run = (await post(date)).json();
    expect(run).toMatchObject({ matched: 1, breakCount: 1 });
    expect(run.breaks).toEqual([
      { kind: 'MISSING_HERE', intentId: paid, lineId: expect.any(String), amountHere: null, amountAtProvider: '2000' },
    ]);
  });

  it('the database keeps one row per statement line of a run: a second is refused', async () => {
    const date = '20250105';
    await paidOn(date, [2100]);
    const run = (await post(date)).json();
    const line = (
      await t.db.query<{ line_id: string; intent_id: string }>(
        'SELECT line_id, intent_id FROM reconciliation_statement_lines WHERE run_id = $1',
        [run.runId],
      )
    ).rows[0];
    if (line === undefined) throw new Error('no line kept');
    await expect(
      t.db.query(
        "INSERT INTO reconciliation_statement_lines (run_id, line_id, intent_id, type, amount, value_date) VALUES ($1, $2, $3, 'PAYOUT', 2100, $4)",
        [run.runId, line.line_id, randomUUID(), date],
      ),
    ).rejects.toMatchObject({ code: '23505' });
  });
});

describe('a MANUAL_REVIEW payout the statement shows paid', () => {
  it('is resolved CONFIRMED by the run, settles with its audit and postings; one with another amount is left alone', async () => {
    const date = '20250103';
    // 9998: the confirm times out and every inquiry answers pending, so both end in MANUAL_REVIEW.
    const review = await payout(t, USER, '0800009998', 3000);
    const other = await payout(t, USER, '0811119998', 3100);
    await drain(psp, outbox);
    expect((await intentOf(t, review)).status).toBe('MANUAL_REVIEW');
    expect((await intentOf(t, other)).status).toBe('MANUAL_REVIEW');
    sim().statements.plant({ date, addLine: { type: 'PAYOUT', amount: '3000', intentId: review } });
    sim().statements.plant({ date, addLine: { type: 'PAYOUT', amount: '3099', intentId: other } });
    const userBefore = await balanceOf(t.db, USER_ACCOUNT);
    const nostroBefore = await balanceOf(t.db, NOSTRO);

    const res = await post(date);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ matched: 1, resolved: 1, breakCount: 1 });
    expect(res.json().breaks).toEqual([
      { kind: 'AMOUNT_MISMATCH', intentId: other, lineId: expect.any(String), amountHere: '3100', amountAtProvider: '3099' },
    ]);
    await drain(psp, outbox);

    expect((await intentOf(t, review)).status).toBe('SETTLED');
    expect((await intentOf(t, other)).status).toBe('MANUAL_REVIEW');
    const last = (await eventsOf(t, review)).at(-1);
    expect(last).toMatchObject({
      statusFrom: 'MANUAL_REVIEW',
      statusTo: 'SETTLED',
      payload: { resolution: 'CONFIRMED', resolvedBy: 'admin-token', reason: 'reconciliation' },
    });
    // The reservation was posted: the user's money left for good, the nostro received it.
    expect(userBefore - (await balanceOf(t.db, USER_ACCOUNT))).toBe(3000n);
    expect((await balanceOf(t.db, NOSTRO)) - nostroBefore).toBe(3000n);
    const { rows } = await t.db.query<{ actor: string }>("SELECT actor FROM admin_changes WHERE entity = 'intent' AND entity_id = $1", [
      review,
    ]);
    expect(rows.map((row) => row.actor)).toEqual(['admin-token']);

    // Run again: the settled payout is met by its line, nothing is resolved twice.
    const again = (await post(date)).json();
    expect(again).toMatchObject({ matched: 1, resolved: 0, breakCount: 1 });
    expect(again.breaks).toEqual(res.json().breaks);
  });
});

describe('refusals change nothing', () => {
  const runCount = async () => Number((await t.db.query<{ n: string }>('SELECT count(*)::text AS n FROM reconciliation_runs')).rows[0]?.n);
  const stagedCount = async () =>
    Number((await t.db.query<{ n: string }>('SELECT count(*)::text AS n FROM reconciliation_statement_lines')).rows[0]?.n);

  it.each([
    ['2025-01-01', 422, 'VALIDATION_ERROR'],
    ['20250230', 422, 'VALIDATION_ERROR'],
    ['19691231', 422, 'VALIDATION_ERROR'],
    ['99991231', 422, 'VALIDATION_ERROR'],
    [20250101, 422, 'VALIDATION_ERROR'],
    ['', 422, 'VALIDATION_ERROR'],
  ])('date %j is %i %s', async (date, status, error) => {
    const before = await runCount();
    const res = await post(date);
    expect(res.statusCode, res.body).toBe(status);
    expect(res.json().error).toBe(error);
    expect(await runCount()).toBe(before);
  });

  it('today, not closed by the provider, is 409 CONFLICT; closed early, it runs', async () => {
    const today = bangkokSettlementDate();
    const before = await runCount();
    const res = await post(today);
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().error).toBe('CONFLICT');
    expect(await runCount()).toBe(before);
    sim().statements.plant({ date: today, close: true });
    expect((await post(today)).statusCode).toBe(201);
  });

  it('needs the admin token or a key with forceResolve', async () => {
    expect((await post('20250101', {})).statusCode).toBe(401);
    expect((await post('20250101', { authorization: 'Bearer wrong' })).statusCode).toBe(401);
    const signed = await t.call('POST', '/admin/reconciliation/runs', { body: { date: '20250101' } });
    expect(signed.statusCode).toBe(403);
    expect((await t.call('GET', '/admin/reconciliation/runs')).statusCode).toBe(403);
  });

  it('an unknown run is 404; malformed queries are 422', async () => {
    expect((await t.app.inject({ method: 'GET', url: `/admin/reconciliation/runs/${randomUUID()}`, headers: ADMIN })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: '/admin/reconciliation/runs/not-a-uuid', headers: ADMIN })).statusCode).toBe(422);
    expect((await t.app.inject({ method: 'GET', url: '/admin/reconciliation/runs?date=2025', headers: ADMIN })).statusCode).toBe(422);
    expect(
      (await t.app.inject({ method: 'GET', url: `/admin/reconciliation/runs/${randomUUID()}?after=-1`, headers: ADMIN })).statusCode,
    ).toBe(422);
  });

  it.each([
    ['a negative amount', '20240201', { type: 'PAYOUT', amount: '-100' }],
    ['a decimal amount', '20240202', { type: 'PAYOUT', amount: '100.50' }],
    ['a number for an amount', '20240203', { type: 'PAYOUT', amount: 100 }],
    ['an amount past 64 bits', '20240204', { type: 'PAYOUT', amount: '9223372036854775808' }],
    ['a zero amount', '20240205', { type: 'FEE', amount: '0' }],
    ['an unknown type', '20240206', { type: 'BONUS', amount: '100' }],
    ['an intentId that is no UUID', '20240207', { type: 'PAYOUT', amount: '100', intentId: 'x' }],
    ['a repeated lineId', '20240208', { type: 'FEE', amount: '100', lineId: 'PSPXL-REPEATED' }],
  ])('a statement with %s is 502 PSPX_STATEMENT_INVALID and stores nothing', async (_name, day, line) => {
    await paidOn(day, [500]);
    const reviewBefore = await t.db.query("SELECT id, status FROM intents WHERE status = 'MANUAL_REVIEW' ORDER BY id");
    if ('lineId' in line) sim().statements.plant({ date: day, addLine: { ...line } });
    sim().statements.plant({ date: day, addLine: line });
    const before = await runCount();
    const staged = await stagedCount();
    const res = await post(day);
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().error).toBe('PSPX_STATEMENT_INVALID');
    expect(await runCount()).toBe(before);
    expect(await stagedCount()).toBe(staged);
    expect((await t.db.query("SELECT id, status FROM intents WHERE status = 'MANUAL_REVIEW' ORDER BY id")).rows).toEqual(reviewBefore.rows);
  });

  it('a provider that does not answer is 503 PSPX_UNAVAILABLE, and a retry succeeds', async () => {
    const date = '20250106';
    await paidOn(date, [600]);
    // Every attempt of the client's three fails; fewer than the breaker's five, so it stays closed.
    sim().failNext(3);
    const before = await runCount();
    const res = await post(date);
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json().error).toBe('PSPX_UNAVAILABLE');
    expect(await runCount()).toBe(before);
    const retry = await post(date);
    expect(retry.statusCode, retry.body).toBe(201);
    expect(retry.json()).toMatchObject({ matched: 1, breakCount: 0 });
  });
});

describe('the daily run in the workers', () => {
  it('is due for the day before from RECONCILE_AT in Bangkok, and for the day before that until then', () => {
    // 2025-01-09 01:59 and 02:00 in Bangkok (UTC+7).
    expect(dueStatementDate(new Date('2025-01-08T18:59:00Z'), '02:00')).toBe('20250107');
    expect(dueStatementDate(new Date('2025-01-08T19:00:00Z'), '02:00')).toBe('20250108');
    expect(dueStatementDate(new Date('2025-03-01T00:00:00Z'), '00:00')).toBe('20250228');
  });

  it('reconciles the due day once, then leaves it; a day the provider has not closed is tried again', async () => {
    const outcomes: string[] = [];
    const worker = (now: Date) =>
      createStatementReconciliationWorker({
        db: t.db,
        pspx: createPspxClient({ baseUrl: t.pspxSimulator.url, timeoutMs: 300 }),
        publisher: new StatusPublisher(t.broker, log),
        log,
        reconcileAt: '02:00',
        now: () => now,
        onOutcome: (outcome) => outcomes.push(outcome),
      });
    // A day on which nothing was paid and nothing booked.
    const morning = worker(new Date('2025-01-08T20:00:00Z'));
    expect(await morning.runOnce()).toBe('balanced');
    expect(await morning.runOnce()).toBeNull();
    const runs = (await t.app.inject({ method: 'GET', url: '/admin/reconciliation/runs?date=20250108', headers: ADMIN })).json().runs;
    expect(runs).toEqual([expect.objectContaining({ requestedBy: 'workers', status: 'BALANCED', matched: 0, lineCount: 0 })]);

    // Tomorrow at 03:00 in Bangkok: today is due, and the provider has not closed it.
    const today = bangkokSettlementDate();
    const [y, m, d] = [Number(today.slice(0, 4)), Number(today.slice(4, 6)), Number(today.slice(6, 8))];
    const tomorrowAt3 = new Date(Date.UTC(y, m - 1, d + 1, 3 - 7));
    expect(dueStatementDate(tomorrowAt3, '02:00')).toBe(today);
    const early = worker(tomorrowAt3);
    const closedAlready = (await t.db.query('SELECT 1 FROM reconciliation_runs WHERE statement_date = $1', [today])).rows.length > 0;
    expect(closedAlready).toBe(true); // the 409 test closed today early and ran it: nothing is due
    expect(await early.runOnce()).toBeNull();
    const dayAfter = worker(new Date(Date.UTC(y, m - 1, d + 2, 3 - 7)));
    expect(await dayAfter.runOnce()).toBe('not_closed');
    expect(outcomes).toEqual(['balanced', 'not_closed']);
  });
});

describe('the CLI and the TS client', () => {
  let url: string;
  beforeAll(async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });

  async function reconcile(argv: readonly string[]) {
    let out = '';
    let err = '';
    const io = {
      out: (text: string) => {
        out += text;
      },
      err: (text: string) => {
        err += text;
      },
      env: { PAYORCH_URL: url },
      sleep: async () => {},
    };
    const code = await runCli(['reconcile', ...argv], io);
    return { code, out, err };
  }

  it('payorch reconcile --date prints the run: 0 when BALANCED, 4 with the breaks listed, 2 on a bad command line', async () => {
    // Nothing paid on that day and nothing booked: BALANCED.
    const clean = await reconcile(['--date', '20241230', '--admin-token', 'test-admin-token', '--json']);
    expect(clean.code, clean.err).toBe(EXIT.OK);
    expect(JSON.parse(clean.out)).toMatchObject({ date: '20241230', status: 'BALANCED', matched: 0 });
    const broken = await reconcile(['--date', '20250102', '--admin-token', 'test-admin-token']);
    expect(broken.code, broken.err).toBe(EXIT.VIOLATIONS);
    expect(broken.out).toContain('20250102 BREAKS: 1 matched, 5 break(s)');
    expect(broken.out).toContain('MISSING_AT_PROVIDER');
    expect((await reconcile([])).code).toBe(EXIT.USAGE);
    expect((await reconcile(['--date', '2025-01-01'])).code).toBe(EXIT.USAGE);
  });

  it('the client runs, lists and reads runs', async () => {
    const client = createPayorchClient({ baseUrl: url, adminToken: 'test-admin-token' });
    const run = await client.admin.reconciliation.run('20250101');
    expect(run).toMatchObject({ matched: 3, breakCount: 0, breaks: [] });
    expect(await client.admin.reconciliation.get(run.runId)).toEqual(run);
    const { runs } = await client.admin.reconciliation.list({ date: '20250101', limit: 1 });
    expect(runs.map((listed) => listed.runId)).toEqual([run.runId]);
    await expect(client.admin.reconciliation.run('99991231')).rejects.toMatchObject({ status: 422, code: 'VALIDATION_ERROR' });
  });
});
