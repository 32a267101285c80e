/** Reading reconciliation runs and their breaks (GET /admin/reconciliation/runs[/{runId}]). */
import type { Sql } from '../../adapters/database.js';

export const BREAK_KINDS = ['MISSING_AT_PROVIDER', 'MISSING_HERE', 'AMOUNT_MISMATCH', 'STATUS_MISMATCH', 'UNKNOWN_LINE'] as const;
export type BreakKind = (typeof BREAK_KINDS)[number];
export const RUN_STATUSES = ['RUNNING', 'BALANCED', 'BREAKS'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** Breaks in one answer; the rest are read page by page with `after`. */
export const BREAKS_PAGE_SIZE_MAX = 1000;
export const RUNS_PAGE_SIZE_MAX = 100;

export interface ReconciliationBreak {
  readonly kind: BreakKind;
  readonly intentId: string | null;
  readonly lineId: string | null;
  /** Satang as decimal strings; null where that side has nothing. */
  readonly amountHere: string | null;
  readonly amountAtProvider: string | null;
}

export interface ReconciliationRunSummary {
  readonly runId: string;
  readonly date: string;
  readonly status: RunStatus;
  readonly requestedBy: string;
  readonly startedAt: string;
  readonly finishedAt: string | null;
  readonly lineCount: number;
  readonly matched: number;
  readonly breakCount: number;
  readonly resolved: number;
  readonly openingBalance: string | null;
  readonly closingBalance: string | null;
  readonly providerMovement: string | null;
  readonly nostroMovement: string | null;
}

export interface ReconciliationRun extends ReconciliationRunSummary {
  readonly breaks: readonly ReconciliationBreak[];
  /** Pass as `after` for the next page of breaks; null on the last page. */
  readonly nextBreaksAfter: string | null;
}

interface RunRow {
  id: string;
  statement_date: string;
  status: RunStatus;
  requested_by: string;
  started_at: Date | string;
  finished_at: Date | string | null;
  line_count: string | null;
  matched: string | null;
  break_count: string | null;
  resolved: string | null;
  opening_balance: string | null;
  closing_balance: string | null;
  provider_movement: string | null;
  nostro_movement: string | null;
}

const RUN_COLUMNS = `id, statement_date, status, requested_by, started_at, finished_at, line_count::text, matched::text,
  break_count::text, resolved::text, opening_balance::text, closing_balance::text, provider_movement::text, nostro_movement::text`;

const iso = (value: Date | string) => new Date(value).toISOString();

function summaryOf(row: RunRow): ReconciliationRunSummary {
  return {
    runId: row.id,
    date: row.statement_date,
    status: row.status,
    requestedBy: row.requested_by,
    startedAt: iso(row.started_at),
    finishedAt: row.finished_at === null ? null : iso(row.finished_at),
    lineCount: Number(row.line_count ?? 0),
    matched: Number(row.matched ?? 0),
    breakCount: Number(row.break_count ?? 0),
    resolved: Number(row.resolved ?? 0),
    openingBalance: row.opening_balance,
    closingBalance: row.closing_balance,
    providerMovement: row.provider_movement,
    nostroMovement: row.nostro_movement,
  };
}

/** One run with a page of its breaks (after the break `after`, in the order the run found them). */
export async function readRun(
  sql: Sql,
  runId: string,
  page: { readonly after?: string; readonly limit?: number } = {},
): Promise<ReconciliationRun | null> {
  const { rows } = await sql.query<RunRow>(`SELECT ${RUN_COLUMNS} FROM reconciliation_runs WHERE id = $1`, [runId]);
  const row = rows[0];
  if (row === undefined) return null;
  const limit = Math.min(page.limit ?? BREAKS_PAGE_SIZE_MAX, BREAKS_PAGE_SIZE_MAX);
  const breaks = await sql.query<{
    seq: string;
    outcome: BreakKind;
    intent_id: string | null;
    line_id: string | null;
    amount_here: string | null;
    amount_at_provider: string | null;
  }>(
    // Ordered by the column, not by the text of the same name the list answers: "10" sorts before
    // "9", and a page that ends at the wrong break makes `after` skip the breaks between.
    `SELECT seq::text, outcome, intent_id, line_id, amount_here::text, amount_at_provider::text FROM reconciliation_items i
      WHERE run_id = $1 AND outcome <> 'MATCHED' AND seq > $2::bigint ORDER BY i.seq LIMIT $3`,
    [runId, page.after ?? '0', limit + 1],
  );
  const listed = breaks.rows.slice(0, limit);
  return {
    ...summaryOf(row),
    breaks: listed.map((item) => ({
      kind: item.outcome,
      intentId: item.intent_id,
      lineId: item.line_id,
      amountHere: item.amount_here,
      amountAtProvider: item.amount_at_provider,
    })),
    nextBreaksAfter: breaks.rows.length > limit ? (listed.at(-1)?.seq ?? null) : null,
  };
}

/** The latest runs first, optionally of one date. */
export async function listRuns(sql: Sql, filter: { readonly date?: string; readonly limit?: number }): Promise<ReconciliationRunSummary[]> {
  const limit = Math.min(filter.limit ?? RUNS_PAGE_SIZE_MAX, RUNS_PAGE_SIZE_MAX);
  const { rows } = await sql.query<RunRow>(
    `SELECT ${RUN_COLUMNS} FROM reconciliation_runs WHERE ($1::text IS NULL OR statement_date = $1)
      ORDER BY started_at DESC, id DESC LIMIT $2`,
    [filter.date ?? null, limit],
  );
  return rows.map(summaryOf);
}
