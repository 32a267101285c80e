/**
 * Reconciliation with the provider (docs/rules.md R59): one run fetches the PSPX statement of a
 * Bangkok date, stages its lines as they stream in, matches them against the PSPX payouts of that
 * date in SQL (sql/reconciliation/01-match.sql) and records what it found. Not to be confused with
 * the startup sweep of stuck intents (src/workers/reconciliation.ts).
 *
 * Memory stays flat whatever the day's size: lines go from the HTTP body to the staging table in
 * batches, and the matching is set-based. Amounts are bigint in JavaScript and bigint in SQL; no
 * float ever holds money.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '../../adapters/database.js';
import { DatabaseError } from '../../adapters/database-error.js';
import type { Logger } from '../../adapters/logger.js';
import type { PspxClient } from '../../adapters/pspx/pspx-client.js';
import { bangkokSettlementDate, isCalendarDate } from '../../adapters/pspx/settlement-calendar.js';
import type { StatementLine, StatementSink } from '../../adapters/pspx/statement-reader.js';
import { pspxNostroAccountName } from '../accounts/account-names.js';
import { apiError } from '../errors.js';
import { ledgerAccountId } from '../../ledger/account-id.js';
import { resolveIntent, type ResolveDeps } from '../intents/money/resolve-intent.js';
import { type ReconciliationRun, readRun } from './run-store.js';

/** The provider's statements are in satang of baht. */
const STATEMENT_CURRENCY = 'THB';

/** The audit reason of a payout the run resolved CONFIRMED. */
export const RECONCILIATION_REASON = 'reconciliation';

export interface StatementRunDeps extends ResolveDeps {
  readonly db: Database;
  readonly pspx: PspxClient;
  readonly log: Logger;
  readonly now?: () => Date;
}

/**
 * Runs the reconciliation of `date` (YYYYMMDD) and returns the finished run. Errors, each leaving
 * nothing behind: 422 VALIDATION_ERROR (not a calendar date, or a future one), 409 CONFLICT (the
 * provider has not closed the day, or a run of it is in progress), 503 PSPX_UNAVAILABLE (no usable
 * answer after the client's retries), 502 PSPX_STATEMENT_INVALID (a statement outside the contract).
 */
export async function runStatementReconciliation(
  deps: StatementRunDeps,
  input: { readonly date: string; readonly requestedBy: string },
): Promise<ReconciliationRun> {
  const { date } = input;
  if (!isCalendarDate(date)) throw apiError('VALIDATION_ERROR', `date ${date} is not a calendar date (YYYYMMDD)`);
  if (date > bangkokSettlementDate(deps.now?.() ?? new Date())) throw apiError('VALIDATION_ERROR', `date ${date} is in the future`);

  const runId = randomUUID();
  const startedAt = performance.now();
  let stagedAt = startedAt;
  let nostroMs = 0;
  try {
    await deps.db.query(`INSERT INTO reconciliation_runs (id, statement_date, status, requested_by) VALUES ($1, $2, 'RUNNING', $3)`, [
      runId,
      date,
      input.requestedBy,
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw apiError('CONFLICT', `a reconciliation of ${date} is in progress`);
    throw error;
  }
  try {
    const fetched = await deps.pspx.statement(date, stagingSink(deps.db, runId));
    switch (fetched.kind) {
      case 'not_closed':
        throw apiError('CONFLICT', `the provider has not closed ${date} yet`);
      case 'invalid':
        throw apiError('PSPX_STATEMENT_INVALID', `the provider's statement of ${date} is outside the contract: ${fetched.reason}`);
      case 'unknown':
        throw apiError('PSPX_UNAVAILABLE', `the provider's statement of ${date} could not be read (${fetched.cause}); retrying is safe`);
      case 'closed':
        break;
    }
    const { header } = fetched;
    stagedAt = performance.now();
    await deps.db.transaction(async (tx) => {
      const nostroStartedAt = performance.now();
      const books = await nostroMovement(tx, date);
      nostroMs = performance.now() - nostroStartedAt;
      const { rows } = await tx.query<{ matched: string }>('SELECT reconciliation_match($1, $2)::text AS matched', [runId, date]);
      await tx.query(
        `UPDATE reconciliation_runs r
            SET status = CASE WHEN c.breaks = 0 AND $3::bigint = $4::bigint THEN 'BALANCED' ELSE 'BREAKS' END,
                finished_at = now(), line_count = $2, matched = $7, break_count = c.breaks, resolved = c.resolved,
                opening_balance = $5, closing_balance = $6, provider_movement = $3, nostro_movement = $4
           FROM (SELECT count(*) FILTER (WHERE outcome <> 'MATCHED') AS breaks, count(*) FILTER (WHERE resolved) AS resolved
                   FROM reconciliation_items WHERE run_id = $1) c
          WHERE r.id = $1 AND r.status = 'RUNNING'`,
        [
          runId,
          header.lineCount,
          (header.closingBalance - header.openingBalance).toString(),
          books,
          header.openingBalance.toString(),
          header.closingBalance.toString(),
          rows[0]?.matched ?? '0',
        ],
      );
    });
  } catch (error) {
    await discardRun(deps.db, runId);
    throw error;
  }
  const matchedAt = performance.now();
  await resolvePaidReviews(deps, runId, input.requestedBy);
  const run = await readRun(deps.db, runId);
  if (run === null) throw new Error(`reconciliation run ${runId} vanished`);
  deps.log.info(
    {
      event: 'reconciliation_run',
      runId,
      date,
      status: run.status,
      matched: run.matched,
      breaks: run.breakCount,
      resolved: run.resolved,
      // Where a long run spent its time: reading and staging the statement, then matching it.
      stageMs: Math.round(stagedAt - startedAt),
      matchMs: Math.round(matchedAt - stagedAt),
      // Of matchMs: the books' side, the nostro's ledger transfers of the day.
      nostroMs: Math.round(nostroMs),
    },
    `statement of ${date} reconciled: ${run.status}`,
  );
  return run;
}

/**
 * The nostro's movement in the ledger on the run's Bangkok day, in the provider's sign (docs/rules.md
 * R59): what the books say the partner balance moved, to set against the statement's closing − opening.
 * Posted transfers only (single-phase, and posts of reservations): pending ones and voids move no
 * posted balance. A transfer crediting the nostro (a payout) lowers the partner balance, one debiting
 * it (a top-up) raises it.
 *
 * A statement of its own, not a SQL function: planned with the date's bounds as constants, it
 * reads the day's block ranges through ledger_transfers_created_brin_idx (migrations/036); a
 * function's generic plan knows no bounds and reads the whole table (docs/perf-log/2026-11.md).
 */
async function nostroMovement(tx: Pick<Database, 'query'>, date: string): Promise<string> {
  const { rows } = await tx.query<{ movement: string }>(
    `SELECT coalesce(sum(CASE WHEN t.debit_account_id = $1 THEN t.amount ELSE -t.amount END), 0)::text AS movement
       FROM ledger_transfers t
      WHERE t.created_at >= reconciliation_day_start($2) AND t.created_at < reconciliation_day_start($2) + interval '1 day'
        AND (t.debit_account_id = $1 OR t.credit_account_id = $1)
        AND NOT ledger_is_pending(t.flags) AND NOT ledger_voids_pending(t.flags)`,
    [ledgerAccountId(pspxNostroAccountName(STATEMENT_CURRENCY)), date],
  );
  return rows[0]?.movement ?? '0';
}

/**
 * Lines to the staging table, a batch per COPY: a million lines staged by INSERTs spent most of a
 * run binding parameters and planning, COPY has neither. A lineId the statement repeats is refused
 * by the table's key, which fails the whole batch: the statement is then outside the contract.
 */
function stagingSink(db: Database, runId: string): StatementSink {
  return {
    async begin() {
      await db.query('DELETE FROM reconciliation_statement_lines WHERE run_id = $1', [runId]);
    },
    async lines(batch: readonly StatementLine[]) {
      let rows = '';
      for (const line of batch) {
        rows += `${runId}\t${copyText(line.lineId)}\t${line.intentId ?? '\\N'}\t${line.type}\t${line.amount}\t${line.valueDate}\n`;
      }
      try {
        await db.copyRows('reconciliation_statement_lines', STAGED_COLUMNS, rows);
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw apiError('PSPX_STATEMENT_INVALID', "the provider's statement repeats a lineId: each line must have its own");
        }
        throw error;
      }
    },
  };
}

const STAGED_COLUMNS = ['run_id', 'line_id', 'intent_id', 'type', 'amount', 'value_date'] as const;

/**
 * A lineId in COPY's text format. The reader refuses control characters in a lineId (tab, newline
 * and NUL among them), so a backslash is the only character COPY would read otherwise.
 */
const copyText = (value: string) => (value.includes('\\') ? value.replaceAll('\\', '\\\\') : value);

/** The one automatic change (docs/rules.md R59): a MANUAL_REVIEW payout the statement shows paid, through the admin resolve. */
async function resolvePaidReviews(deps: StatementRunDeps, runId: string, requestedBy: string): Promise<void> {
  const { rows } = await deps.db.query<{ intent_id: string }>(
    'SELECT intent_id FROM reconciliation_items WHERE run_id = $1 AND resolved ORDER BY seq',
    [runId],
  );
  for (const { intent_id: intentId } of rows) {
    try {
      await resolveIntent(deps, {
        intentId,
        resolution: 'CONFIRMED',
        reason: RECONCILIATION_REASON,
        actor: requestedBy,
        log: deps.log,
      });
    } catch (error) {
      // E.g. a person failed it between the match and now: theirs is the decision that stands.
      deps.log.warn({ event: 'reconciliation_resolve_skipped', runId, intentId, err: error }, 'paid payout not resolved by the run');
    }
  }
}

async function discardRun(db: Database, runId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('DELETE FROM reconciliation_statement_lines WHERE run_id = $1', [runId]);
    await tx.query('DELETE FROM reconciliation_items WHERE run_id = $1', [runId]);
    await tx.query("DELETE FROM reconciliation_runs WHERE id = $1 AND status = 'RUNNING'", [runId]);
  });
}

const isUniqueViolation = (error: unknown) => error instanceof DatabaseError && error.code === '23505';
