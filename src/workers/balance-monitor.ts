import type { Database, Sql } from '../adapters/database.js';
import type { PspxClient } from '../adapters/pspx/pspx-client.js';
import type { Logger } from '../adapters/logger.js';
import { ledgerAccountId } from '../ledger/account-id.js';
import type { Ledger } from '../ledger/ledger.js';

/**
 * Compares the provider's partner balance with the ledger's PSPX nostro and logs one of
 * balance_ok, balance_drift or balance_skipped, plus low_partner_balance under the floor.
 *
 * What "difference" means. The nostro is credited by every payout (transit → nostro) and debited
 * by every top-up (nostro → user), so its ledger balance N (credits − debits posted) moves
 * against the partner balance P: a payout lowers P and raises N by the same amount, a top-up
 * the other way. P + N therefore stays constant; that constant is the baseline B (the prefunding
 * the ledger does not hold). The ledger then says P should be B − N, except for payouts the
 * provider may already have made that the ledger has not booked yet: PSPX intents in
 * CONFIRM_PENDING, INQUIRING, CONFIRMED (outbox not run yet) or MANUAL_REVIEW, worth U in total
 * (amount − postFee each). So P is consistent inside [B − N − U, B − N], and
 *
 *   difference = P − (B − N)        when P is above the range (the provider holds more than booked)
 *              = P − (B − N − U)    when P is below it (the provider paid out more than booked)
 *              = 0                  inside.
 *
 * |difference| > threshold is balance_drift. The ledger side is read before and after the
 * provider call and the range spans both readings, so a payout booked in between is no drift.
 *
 * B is captured by the first reading without payouts in flight (B = P + N) and stored in
 * balance_baselines, so restarts and other instances compare against the same value; an operator
 * who tops up the prefunding deletes the row (or books the top-up in the ledger).
 */

export interface BalanceMonitorSettings {
  /** config.balanceDriftThreshold: |difference| above it is drift. */
  readonly driftThreshold: bigint;
  /** A partner balance below this is low_partner_balance. */
  readonly lowBalanceFloor: bigint;
  readonly nostroAccount: string;
  /** Key of the baseline row. */
  readonly provider: string;
}

export const BALANCE_MONITOR_DEFAULTS = {
  lowBalanceFloor: 1_000_000n,
  nostroAccount: 'system.nostro.pspx.THB',
  provider: 'pspx',
} as const;

export interface BalanceMonitorDeps {
  readonly db: Database;
  readonly ledger: Ledger;
  readonly pspx: PspxClient;
  readonly log: Logger;
  readonly settings: BalanceMonitorSettings;
}

export type BalanceReading =
  | { readonly event: 'balance_skipped'; readonly reason: string }
  | {
      readonly event: 'balance_ok' | 'balance_drift';
      readonly partnerBalance: bigint;
      readonly expectedMin: bigint;
      readonly expectedMax: bigint;
      readonly difference: bigint;
      readonly low: boolean;
    };

export interface BalanceMonitor {
  runOnce(): Promise<BalanceReading>;
}

interface LedgerSide {
  /** N: credits − debits posted on the nostro. */
  readonly nostro: bigint;
  /** U: payouts the provider may have made that the ledger has not booked. */
  readonly unbooked: bigint;
}

export function createBalanceMonitor(deps: BalanceMonitorDeps): BalanceMonitor {
  return { runOnce: () => checkBalance(deps) };
}

async function checkBalance(deps: BalanceMonitorDeps): Promise<BalanceReading> {
  const { log, settings } = deps;
  const before = await readLedgerSide(deps, deps.db);
  const answer = await deps.pspx.partnerBalance();
  if (answer.kind === 'unknown') {
    log.warn({ event: 'balance_skipped', cause: answer.cause, detail: answer.detail }, 'PSPX partner balance unavailable; check skipped');
    return { event: 'balance_skipped', reason: answer.cause };
  }
  const after = await readLedgerSide(deps, deps.db);
  const partnerBalance = answer.balance;
  const baseline = await baselineOf(deps, partnerBalance, before, after);
  if (baseline === null) {
    log.warn(
      { event: 'balance_skipped', cause: 'baseline_not_captured' },
      'payouts in flight: the balance baseline is captured at a quieter reading',
    );
    return { event: 'balance_skipped', reason: 'baseline_not_captured' };
  }
  const expectedMax = max(baseline - before.nostro, baseline - after.nostro);
  const expectedMin = min(baseline - before.nostro - before.unbooked, baseline - after.nostro - after.unbooked);
  const difference =
    partnerBalance > expectedMax ? partnerBalance - expectedMax : partnerBalance < expectedMin ? partnerBalance - expectedMin : 0n;
  const abs = difference < 0n ? -difference : difference;
  const event = abs > settings.driftThreshold ? 'balance_drift' : 'balance_ok';
  const low = partnerBalance < settings.lowBalanceFloor;
  const fields = {
    event,
    partnerBalance: partnerBalance.toString(),
    nostroBalance: after.nostro.toString(),
    unbookedPayouts: after.unbooked.toString(),
    expectedMin: expectedMin.toString(),
    expectedMax: expectedMax.toString(),
    difference: difference.toString(),
    threshold: settings.driftThreshold.toString(),
  };
  if (event === 'balance_drift') log.error(fields, 'PSPX partner balance drifted from the ledger');
  else log.info(fields, 'PSPX partner balance agrees with the ledger');
  if (low) {
    log.warn(
      { event: 'low_partner_balance', partnerBalance: partnerBalance.toString(), floor: settings.lowBalanceFloor.toString() },
      'PSPX partner balance below the floor',
    );
  }
  return { event, partnerBalance, expectedMin, expectedMax, difference, low };
}

async function readLedgerSide(deps: BalanceMonitorDeps, sql: Sql): Promise<LedgerSide> {
  const [account] = await deps.ledger.lookupAccounts(sql, [ledgerAccountId(deps.settings.nostroAccount)]);
  if (account === undefined) throw new Error(`nostro ${deps.settings.nostroAccount} is missing from the ledger`);
  const { rows } = await sql.query<{ unbooked: bigint }>(
    `SELECT coalesce(sum(amount - post_fee_amount), 0)::bigint AS unbooked FROM intents
      WHERE channel = 'PSPX_TRANSFER' AND to_account_name = $1
        AND ((status = 'AUTHORIZED' AND psp_state IN ('CONFIRM_PENDING', 'INQUIRING', 'CONFIRMED')) OR status = 'MANUAL_REVIEW')`,
    [deps.settings.nostroAccount],
  );
  return { nostro: account.creditsPosted - account.debitsPosted, unbooked: rows[0]?.unbooked ?? 0n };
}

/** The stored baseline, or one captured now when nothing is in flight; null when it cannot be yet. */
async function baselineOf(deps: BalanceMonitorDeps, partnerBalance: bigint, before: LedgerSide, after: LedgerSide): Promise<bigint | null> {
  const { provider, nostroAccount } = deps.settings;
  const stored = await deps.db.query<{ baseline: bigint }>('SELECT baseline FROM balance_baselines WHERE provider = $1', [provider]);
  if (stored.rows[0] !== undefined) return stored.rows[0].baseline;
  const quiet = before.unbooked === 0n && after.unbooked === 0n && before.nostro === after.nostro;
  if (!quiet) return null;
  // ON CONFLICT: another instance captured it first; both then read the same row.
  await deps.db.query(
    'INSERT INTO balance_baselines (provider, nostro_account, baseline) VALUES ($1, $2, $3) ON CONFLICT (provider) DO NOTHING',
    [provider, nostroAccount, (partnerBalance + after.nostro).toString()],
  );
  const captured = await deps.db.query<{ baseline: bigint }>('SELECT baseline FROM balance_baselines WHERE provider = $1', [provider]);
  const baseline = captured.rows[0]?.baseline ?? null;
  if (baseline !== null)
    deps.log.info({ event: 'balance_baseline_captured', baseline: baseline.toString() }, 'PSPX balance baseline captured');
  return baseline;
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const min = (a: bigint, b: bigint) => (a < b ? a : b);
