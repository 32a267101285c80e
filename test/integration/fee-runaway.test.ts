import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFeeEngine, FEE_WALL_LIMIT_MS, FeeEvaluationError, FeePoolBusyError } from '../../src/domain/rules/fees/index.js';
import type { DryRunResult } from '../../src/domain/rules/fees/fee-engine.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';

/**
 * A fee rule whose cost grows with the request cannot hold the service (docs/SECURITY.md §7):
 * evaluations run on worker threads, and one past FEE_WALL_LIMIT_MS of wall time is cut (422
 * EVAL_ERROR) by killing its worker, while every other request keeps being answered.
 */

/** Passes the admin trial run (no sizes in its sample metadata); one long built-in call per size in a request. */
const COSTLY_RULE =
  "(metadata.sizes||[]).reduce((s,n)=>s+new Array(n).fill(0).length*0,0) >= 0 ? [{account: 'system.revenue.THB', amount: 1}] : []";
/** About 1 KB of request: many seconds of QuickJS built-ins without the watchdog. */
const HOSTILE_SIZES = Array.from({ length: 120 }, () => 1_000_000);
const HEALTH_ANSWER_MS_MAX = 250;
/** The cut comes at the wall limit; the rest is a loaded CI machine's scheduling. */
const CUT_ANSWER_MS_MAX = FEE_WALL_LIMIT_MS + 900;

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
  const stored = await t.call('POST', '/admin/fee-rules', {
    service: 'admin-tool',
    body: { name: 'grows with metadata', operationType: 'QP_TOPUP', expression: COSTLY_RULE, timing: 'PRE' },
  });
  expect(stored.statusCode, stored.body).toBe(201);
});
afterAll(async () => t?.close());

const quote = (sizes: readonly number[]) =>
  t.call('POST', '/intents/quote', { service: 'mobile-gateway', body: { operationType: 'QP_TOPUP', amount: 100, metadata: { sizes } } });

/** GET /health every 20 ms until `until` settles; the latency of each answer. */
async function healthWhile(until: Promise<unknown>): Promise<{ latenciesMs: number[]; answeredBeforeEnd: number }> {
  let done = false;
  void until.finally(() => {
    done = true;
  });
  const latenciesMs: number[] = [];
  let answeredBeforeEnd = 0;
  while (!done) {
    const started = performance.now();
    await t.app.inject({ method: 'GET', url: '/health' });
    latenciesMs.push(performance.now() - started);
    if (!done) answeredBeforeEnd += 1;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { latenciesMs, answeredBeforeEnd };
}

describe('a runaway fee rule', () => {
  it('is cut with 422 EVAL_ERROR near the wall limit while /health keeps answering within 250 ms', async () => {
    const started = performance.now();
    const answer = quote(HOSTILE_SIZES);
    const health = await healthWhile(answer);
    const res = await answer;
    const elapsedMs = performance.now() - started;
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json()).toMatchObject({ error: 'EVAL_ERROR' });
    expect(elapsedMs).toBeLessThan(CUT_ANSWER_MS_MAX);
    expect(health.answeredBeforeEnd).toBeGreaterThan(0);
    expect(Math.max(...health.latenciesMs)).toBeLessThan(HEALTH_ANSWER_MS_MAX);
  });

  it('leaves a replaced worker behind: the same rule with small metadata is answered', async () => {
    const res = await quote([10, 20]);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ fee: '1' });
  });

  it('many at once are all cut, and health answers throughout', async () => {
    const answers = Promise.all(Array.from({ length: 6 }, () => quote(HOSTILE_SIZES)));
    const health = await healthWhile(answers);
    expect((await answers).map((r) => r.statusCode)).toEqual([422, 422, 422, 422, 422, 422]);
    expect(Math.max(...health.latenciesMs)).toBeLessThan(HEALTH_ANSWER_MS_MAX);
    expect((await quote([1])).statusCode).toBe(200);
  });

  it('a payment it applies to is refused and moves nothing', async () => {
    await t.call('POST', '/accounts', { user: 7801, body: { userId: 7801, currency: 'THB' } });
    const res = await t.call('POST', '/intents', {
      user: 7801,
      body: { idempotencyKey: crypto.randomUUID(), operationType: 'QP_TOPUP', amount: 100, metadata: { sizes: HOSTILE_SIZES } },
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error).toBe('EVAL_ERROR');
    await expectLedgerInvariants(t.db);
  });

  it('an invoice confirm it applies to is refused, moves nothing, and leaves the invoice to be confirmed later', async () => {
    const merchant = 7807;
    const payer = 7808;
    await t.call('POST', '/accounts', {
      service: 'admin-tool',
      user: 0,
      body: { userId: merchant, currency: 'THB', entityType: 'merchant' },
    });
    await t.call('POST', '/accounts', { user: payer, body: { userId: payer, currency: 'THB' } });
    const topUp = await t.call('POST', '/intents', {
      user: payer,
      body: { idempotencyKey: crypto.randomUUID(), operationType: 'QP_TOPUP', amount: 5_000 },
    });
    expect(topUp.statusCode, topUp.body).toBe(201);
    const stored = await t.call('POST', '/admin/fee-rules', {
      service: 'admin-tool',
      body: { name: 'invoice grows with metadata', operationType: 'INVOICE_PAYMENT', expression: COSTLY_RULE, timing: 'PRE' },
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const issued = await t.call('POST', '/intents', {
      user: merchant,
      body: {
        idempotencyKey: crypto.randomUUID(),
        operationType: 'INVOICE_PAYMENT',
        amount: 1_000,
        toLedgerAccountId: ledgerAccountId(`merchant.${merchant}.THB`),
        metadata: { sizes: HOSTILE_SIZES },
      },
    });
    expect(issued.statusCode, issued.body).toBe(201);
    const intentId = issued.json().intentId as string;
    const confirm = await t.call('POST', `/intents/${intentId}/confirm`, {
      user: payer,
      body: { payerLedgerAccountId: ledgerAccountId(`user.${payer}.THB`), payerUserId: payer, idempotencyKey: crypto.randomUUID() },
    });
    expect(confirm.statusCode, confirm.body).toBe(422);
    expect(confirm.json().error).toBe('EVAL_ERROR');
    const after = await t.call('GET', `/intents/${intentId}`, { user: merchant });
    expect(after.json().status).toBe('CREATED');
    const balance = await t.call('GET', `/accounts/user.${payer}.THB/balance`);
    expect(balance.json().balance).toBe('5000');
    await expectLedgerInvariants(t.db);
  });

  it('an endless loop in the admin dry-run is cut the same way', async () => {
    const res = await t.call('POST', '/admin/fee-rules/dry-run', {
      service: 'admin-tool',
      body: { expression: 'while (true) {}', context: { operationType: 'P2P_TRANSFER', amount: 1, currency: 'THB' } },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('EVAL_ERROR');
  });
});

describe('the fee worker pool', () => {
  const context = { operationType: 'P2P_TRANSFER', amount: 100n, currency: 'THB', metadata: {} };

  it('refuses work past its queue bound instead of queueing without end, and ends its workers on dispose', async () => {
    const engine = await createFeeEngine({ workers: 1, queueMax: 1 });
    const runaway = engine.dryRun('while (true) {}', context);
    const queued = engine.dryRun('[]', context);
    await expect(engine.dryRun('[]', context)).rejects.toBeInstanceOf(FeePoolBusyError);
    await expect(runaway).rejects.toBeInstanceOf(FeeEvaluationError);
    expect(await queued).toEqual({ splits: [], totalFee: 0n });
    await engine.dispose();
    await expect(engine.dryRun('[]', context)).rejects.toThrow(/closed/);
  });

  it('does not cut work that finished while this thread was held up past the limit', async () => {
    const engine = await createFeeEngine({ workers: 1 });
    try {
      // Sent from a check-phase callback that then keeps this thread busy past the limit: the worker
      // answers meanwhile, and the next turn of the loop runs the due watchdog timer before it
      // reads that answer, as when the embedded database or a loaded machine holds the thread.
      const { answered } = await new Promise<{ answered: Promise<DryRunResult> }>((resolve) =>
        setImmediate(() => {
          const sent = engine.dryRun('[{account: "system.revenue.THB", amount: 7}]', context);
          const busyUntil = performance.now() + FEE_WALL_LIMIT_MS * 3;
          while (performance.now() < busyUntil);
          resolve({ answered: sent });
        }),
      );
      expect((await answered).totalFee).toBe(7n);
    } finally {
      await engine.dispose();
    }
  });

  it('cuts only the runaway of a batch: the jobs sent with it are answered, each with its own result', async () => {
    const engine = await createFeeEngine({ workers: 1 });
    try {
      // The worker is busy with the first job, so the rest wait and go to it as one batch, the
      // runaway in their middle.
      const first = engine.dryRun('[{account: "system.revenue.THB", amount: 1}]', context);
      const before = Array.from({ length: 5 }, (_, i) => engine.dryRun(`[{account: "system.revenue.THB", amount: ${i + 10}}]`, context));
      const runaway = engine.dryRun(COSTLY_RULE, { ...context, metadata: { sizes: HOSTILE_SIZES } });
      const after = Array.from({ length: 5 }, (_, i) => engine.dryRun(`[{account: "system.revenue.THB", amount: ${i + 20}}]`, context));
      await expect(runaway).rejects.toMatchObject({ reason: 'timeout' });
      expect((await first).totalFee).toBe(1n);
      expect((await Promise.all(before)).map((r) => r.totalFee)).toEqual([10n, 11n, 12n, 13n, 14n]);
      expect((await Promise.all(after)).map((r) => r.totalFee)).toEqual([20n, 21n, 22n, 23n, 24n]);
    } finally {
      await engine.dispose();
    }
  });
});
