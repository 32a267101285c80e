import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { insertIntent, type NewIntent } from '../../src/domain/intents/store/intent-store.js';
import { reserveTransfer } from '../../src/domain/intents/money/money-path.js';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import type { Channel, IntentStatus, OperationType } from '../../src/domain/model.js';
import { transitAccountName } from '../../src/domain/channels/channels.js';
import { BALANCE_MONITOR_DEFAULTS, type BalanceMonitorSettings, createBalanceMonitor } from '../../src/workers/balance-monitor.js';
import { createOutboxWorker, OUTBOX_DEFAULTS } from '../../src/workers/outbox-worker.js';
import { createPspWorker } from '../../src/workers/psp-worker.js';
import { RECONCILED_REASON, reconcileStuckIntents } from '../../src/workers/reconciliation.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { balanceOf, expectLedgerInvariants } from '../support/invariants.js';
import { createUser, topUp } from '../support/payments.js';
import { captureLogger, drain, payout, registerIpps, testPspSettings, trailOf } from '../support/workers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  for (const user of [801, 802, 803]) await createUser(t, user);
  await registerIpps(t, 803);
  await topUp(t, 801, 100_000);
  await topUp(t, 803, 1_000_000);
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

interface Stuck {
  readonly status: IntentStatus;
  readonly channel?: Channel;
  readonly operationType?: OperationType;
  readonly ageS: number;
  readonly reserve: boolean;
  readonly amount?: bigint;
}

/** An intent as a process that died half-way would have left it: a row, maybe a reservation, no more. */
async function stuckIntent(spec: Stuck): Promise<string> {
  const id = randomUUID();
  const channel = spec.channel ?? 'INTERNAL_P2P';
  const operationType = spec.operationType ?? 'P2P_TRANSFER';
  const amount = spec.amount ?? 1000n;
  const intent: NewIntent = {
    id,
    idempotencyKey: randomUUID(),
    serviceId: 'wallet-api',
    requestFingerprint: 'test',
    userId: 801,
    operationType,
    channel,
    fromAccountName: 'user.801.THB',
    toAccountName: 'user.802.THB',
    fromUserId: 801,
    toUserId: 802,
    externalRef: null,
    amount,
    preFeeAmount: 0n,
    postFeeAmount: 0n,
    feeSplits: [],
    currency: 'THB',
    status: spec.status,
    pspState: channel === 'PSPX_TRANSFER' ? 'NEW' : null,
    failureReason: null,
    metadata: channel === 'PSPX_TRANSFER' ? { ipps: { receiverType: 'MSISDN', receiverAccount: '0812340000' } } : {},
    fromName: null,
    toName: null,
    comment: null,
    live: false,
    expiresAt: channel === 'MERCHANT_INVOICE' ? new Date(Date.now() + 600_000) : null,
    reservedAt: null,
    qrSignature: null,
    issuedByUserId: null,
    transferIds: [],
  };
  await t.db.transaction(async (tx) => {
    expect(await insertIntent(tx, intent)).not.toBeNull();
    await tx.query("UPDATE intents SET created_at = now() - $2::bigint * interval '1 second' WHERE id = $1", [id, spec.ageS]);
    if (!spec.reserve) return;
    const plan = {
      intentId: id,
      operationType,
      fromLedgerId: ledgerAccountId('user.801.THB'),
      toLedgerId: ledgerAccountId('user.802.THB'),
      transitLedgerId: ledgerAccountId(transitAccountName(channel, 'THB')),
      amount,
      preFee: 0n,
      postFee: 0n,
      feeLegs: [],
    };
    expect(await t.ledger.createTransfers(tx, [reserveTransfer(plan, 1800)])).toEqual([]);
  });
  return id;
}

async function statusOf(id: string): Promise<{ status: string; failure_reason: string | null }> {
  const { rows } = await t.db.query<{ status: string; failure_reason: string | null }>(
    'SELECT status, failure_reason FROM intents WHERE id = $1',
    [id],
  );
  if (rows[0] === undefined) throw new Error(`no intent ${id}`);
  return rows[0];
}

async function pendingDebits(accountName: string): Promise<bigint> {
  const [account] = await t.ledger.lookupAccounts(t.db, [ledgerAccountId(accountName)]);
  return account?.debitsPending ?? -1n;
}

describe('startup reconciliation', () => {
  it('fails stuck internal intents older than RECONCILE_AGE_S and voids their reservations; leaves the rest alone', async () => {
    const userBefore = await balanceOf(t.db, 'user.801.THB');
    const pendingBefore = await pendingDebits('user.801.THB');
    const authorizedReserved = await stuckIntent({ status: 'AUTHORIZED', ageS: 600, reserve: true, amount: 1500n });
    const authorizedBare = await stuckIntent({ status: 'AUTHORIZED', ageS: 600, reserve: false });
    const validated = await stuckIntent({ status: 'VALIDATED', ageS: 600, reserve: false });
    const young = await stuckIntent({ status: 'AUTHORIZED', ageS: 10, reserve: true, amount: 700n });
    const invoice = await stuckIntent({
      status: 'CREATED',
      channel: 'MERCHANT_INVOICE',
      operationType: 'INVOICE_PAYMENT',
      ageS: 600,
      reserve: false,
    });
    const pspx = await stuckIntent({
      status: 'AUTHORIZED',
      channel: 'PSPX_TRANSFER',
      operationType: 'PSPX_WITHDRAWAL',
      ageS: 600,
      reserve: true,
      amount: 900n,
    });
    expect(await pendingDebits('user.801.THB')).toBe(pendingBefore + 1500n + 700n + 900n);

    const log = captureLogger();
    const failed = await reconcileStuckIntents({
      db: t.db,
      ledger: t.ledger,
      publisher: new StatusPublisher(t.broker, log),
      log,
      ageS: 300,
    });

    expect(new Set(failed)).toEqual(new Set([authorizedReserved, authorizedBare, validated]));
    for (const id of failed) {
      expect(await statusOf(id)).toEqual({ status: 'FAILED', failure_reason: RECONCILED_REASON });
      const trail = await trailOf(t, id);
      expect(trail.at(-1)?.[1]).toBe('FAILED');
    }
    expect((await trailOf(t, authorizedReserved)).at(-1)).toEqual(['AUTHORIZED', 'FAILED']);
    expect((await trailOf(t, validated)).at(-1)).toEqual(['VALIDATED', 'FAILED']);
    expect(await statusOf(young)).toMatchObject({ status: 'AUTHORIZED' });
    expect(await statusOf(invoice)).toMatchObject({ status: 'CREATED' });
    expect(await statusOf(pspx)).toMatchObject({ status: 'AUTHORIZED' });
    // Only the stuck reservation was released; the posted balance never moved.
    expect(await pendingDebits('user.801.THB')).toBe(pendingBefore + 700n + 900n);
    expect(await balanceOf(t.db, 'user.801.THB')).toBe(userBefore);
    expect(log.events('intent_reconciled')).toHaveLength(3);

    // A second start (or a second instance) finds nothing left to do.
    expect(
      await reconcileStuckIntents({ db: t.db, ledger: t.ledger, publisher: new StatusPublisher(t.broker, log), log, ageS: 300 }),
    ).toEqual([]);

    // Leave no money held for the next tests: the young one ages out, the PSPX one is the worker's.
    await t.db.query("UPDATE intents SET created_at = now() - interval '1 hour' WHERE id = $1", [young]);
    expect(
      await reconcileStuckIntents({ db: t.db, ledger: t.ledger, publisher: new StatusPublisher(t.broker, log), log, ageS: 300 }),
    ).toEqual([young]);
    await t.db.query("UPDATE intents SET status = 'MANUAL_REVIEW', psp_state = 'MANUAL_REVIEW' WHERE id = $1", [pspx]);
    const resolved = await t.call('POST', `/admin/intents/${pspx}/resolve`, { service: 'admin-tool', body: { resolution: 'FAILED' } });
    expect(resolved.statusCode).toBe(200);
    const outbox = createOutboxWorker({
      db: t.db,
      ledger: t.ledger,
      publisher: new StatusPublisher(t.broker, log),
      log,
      settings: OUTBOX_DEFAULTS,
    });
    expect(await outbox.runOnce()).toMatchObject({ leader: true, jobsDone: 1 });
    await outbox.stop();
    expect(await pendingDebits('user.801.THB')).toBe(pendingBefore);
  });
});

describe('balance monitor', () => {
  const log = captureLogger();
  const client = () => createPspxClient({ baseUrl: t.pspxSimulator.url, backoffBaseMs: 1, backoffCapMs: 2 });
  const monitor = (settings: Partial<BalanceMonitorSettings> = {}) =>
    createBalanceMonitor({
      db: t.db,
      ledger: t.ledger,
      pspx: client(),
      log,
      settings: { ...BALANCE_MONITOR_DEFAULTS, driftThreshold: 10_000n, ...settings },
    });
  const lastEvent = () => log.lines.filter((line) => typeof line.bindings.event === 'string').at(-1)?.bindings;

  it('captures the baseline at the first quiet reading and logs balance_ok', async () => {
    await t.db.query('DELETE FROM balance_baselines');
    const reading = await monitor().runOnce();
    expect(reading).toMatchObject({ event: 'balance_ok', difference: 0n, low: false });
    expect(log.events('balance_baseline_captured')).toHaveLength(1);
    expect(lastEvent()).toMatchObject({
      event: 'balance_ok',
      difference: '0',
      partnerBalance: t.pspxSimulator.simulator.balance.toString(),
    });
  });

  it('a payout paid by the provider but not yet booked is inside the range; once booked the range closes again', async () => {
    const psp = createPspWorker({ db: t.db, pspx: client(), log, settings: testPspSettings });
    const outbox = createOutboxWorker({
      db: t.db,
      ledger: t.ledger,
      publisher: new StatusPublisher(t.broker, log),
      log,
      settings: OUTBOX_DEFAULTS,
    });
    try {
      const id = await payout(t, 803, '0812348888', 50_000);
      while ((await psp.runOnce()) > 0);
      expect(t.pspxSimulator.simulator.payoutsMade(id)).toBe(1);

      const inFlight = await monitor().runOnce();
      expect(inFlight).toMatchObject({ event: 'balance_ok', difference: 0n });
      if (inFlight.event === 'balance_skipped') throw new Error('unexpected skip');
      expect(inFlight.expectedMax - inFlight.expectedMin).toBe(50_000n);

      await drain(psp, outbox);
      const booked = await monitor().runOnce();
      expect(booked).toMatchObject({ event: 'balance_ok', difference: 0n });
      if (booked.event === 'balance_skipped') throw new Error('unexpected skip');
      expect(booked.expectedMax).toBe(booked.expectedMin);
    } finally {
      await outbox.stop();
    }
  });

  it('a ledger movement the provider never saw is a difference: within the threshold balance_ok, above it balance_drift', async () => {
    // The simulator does not see top-ups: each one debits the nostro without crediting the partner balance.
    await topUp(t, 801, 4000);
    expect(await monitor().runOnce()).toMatchObject({ event: 'balance_ok', difference: -4000n });
    await topUp(t, 801, 20_000);
    const drift = await monitor().runOnce();
    expect(drift).toMatchObject({ event: 'balance_drift', difference: -24_000n });
    expect(log.events('balance_drift').at(-1)?.bindings).toMatchObject({ difference: '-24000', threshold: '10000' });
    expect(log.events('balance_drift').at(-1)?.level).toBe('error');
  });

  it('low_partner_balance under the floor, in addition to the comparison', async () => {
    await t.db.query('DELETE FROM balance_baselines');
    const floor = t.pspxSimulator.simulator.balance + 1n;
    const reading = await monitor({ lowBalanceFloor: floor }).runOnce();
    expect(reading).toMatchObject({ event: 'balance_ok', low: true });
    expect(log.events('low_partner_balance').at(-1)?.bindings).toMatchObject({
      floor: floor.toString(),
      partnerBalance: (floor - 1n).toString(),
    });
  });

  it('balance_skipped when the provider does not answer', async () => {
    t.pspxSimulator.simulator.failNext(3);
    expect(await monitor().runOnce()).toEqual({ event: 'balance_skipped', reason: 'http_5xx' });
    expect(lastEvent()).toMatchObject({ event: 'balance_skipped', cause: 'http_5xx' });
  });
});
