import type { Database } from '../adapters/database.js';
import type { Logger } from '../adapters/logger.js';
import type { PspxClient } from '../adapters/pspx/pspx-client.js';
import { bangkokSettlementDate, dayBefore } from '../adapters/pspx/settlement-calendar.js';
import { ApiError } from '../domain/errors.js';
import type { StatusPublisher } from '../domain/intents/store/status-publisher.js';
import { runStatementReconciliation } from '../domain/reconciliation/statement-run.js';

/**
 * The daily reconciliation with the provider (docs/rules.md R59), not the startup sweep of stuck
 * intents (reconciliation.ts): from RECONCILE_AT (Bangkok) on, the day before is reconciled once.
 * Until then the day before that is the one due, so a process that was down at RECONCILE_AT
 * catches up. Each tick asks whether the due day has a finished run; a day the provider has not
 * closed (409) or could not serve is simply due again at the next tick.
 *
 * Several instances: a run in progress holds the date (a unique index of RUNNING runs), so the
 * others' attempts are refused 409 and they find the finished run at their next tick.
 */

export const STATEMENT_WORKER_REQUESTER = 'workers';
/** How often the due day is checked, and so how soon a day the provider had not closed is tried again. */
export const STATEMENT_CHECK_INTERVAL_MS = 300_000;

export type StatementRunOutcome = 'balanced' | 'breaks' | 'not_closed' | 'failed';

export interface StatementReconciliationDeps {
  readonly db: Database;
  readonly pspx: PspxClient;
  readonly publisher: StatusPublisher;
  readonly log: Logger;
  /** RECONCILE_AT, HH:MM in Asia/Bangkok. */
  readonly reconcileAt: string;
  readonly now?: () => Date;
  /** Told of each attempt's outcome, for payorch_reconciliation_runs_total. */
  readonly onOutcome?: (outcome: StatementRunOutcome) => void;
}

export interface StatementReconciliationWorker {
  /** One check: reconciles the due day unless it has a finished run. Returns the outcome, or null when nothing was due. */
  runOnce(): Promise<StatementRunOutcome | null>;
}

const bangkokTime = new Intl.DateTimeFormat('en-GB', { timeZone: 'Asia/Bangkok', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });

/** The statement date due at `at`: the day before once RECONCILE_AT has passed in Bangkok, else the day before that. */
export function dueStatementDate(at: Date, reconcileAt: string): string {
  const yesterday = dayBefore(bangkokSettlementDate(at));
  return bangkokTime.format(at) >= reconcileAt ? yesterday : dayBefore(yesterday);
}

export function createStatementReconciliationWorker(deps: StatementReconciliationDeps): StatementReconciliationWorker {
  return {
    async runOnce() {
      const date = dueStatementDate(deps.now?.() ?? new Date(), deps.reconcileAt);
      const { rows } = await deps.db.query("SELECT 1 FROM reconciliation_runs WHERE statement_date = $1 AND status <> 'RUNNING' LIMIT 1", [
        date,
      ]);
      if (rows.length > 0) return null;
      const outcome = await attempt(deps, date);
      deps.onOutcome?.(outcome);
      return outcome;
    },
  };
}

async function attempt(deps: StatementReconciliationDeps, date: string): Promise<StatementRunOutcome> {
  try {
    const run = await runStatementReconciliation(deps, { date, requestedBy: STATEMENT_WORKER_REQUESTER });
    if (run.status === 'BREAKS') {
      deps.log.warn(
        { event: 'reconciliation_breaks', runId: run.runId, date, breaks: run.breakCount },
        `the statement of ${date} has breaks: GET /admin/reconciliation/runs/${run.runId}`,
      );
      return 'breaks';
    }
    return 'balanced';
  } catch (error) {
    if (error instanceof ApiError && error.code === 'CONFLICT') {
      deps.log.info({ event: 'reconciliation_not_ready', date, reason: error.message }, 'reconciliation tried again later');
      return 'not_closed';
    }
    deps.log.warn({ event: 'reconciliation_failed', date, err: error }, 'reconciliation tried again at the next check');
    return 'failed';
  }
}
