import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from './logger.js';
import type { Sql } from './sql.js';

/**
 * What a client is told to wait before retrying while the database does not answer (docs/rules.md
 * R66: 1–5 s). Short, because a restart or failover is usually over in seconds, and retries with
 * the same idempotency key are safe.
 */
export const DATABASE_RETRY_AFTER_S = 2;
/** How often an outage asks the database whether it is back, to log the outage's end once. */
export const OUTAGE_PROBE_INTERVAL_MS = 500;

/** Socket-level failures of a connect or of an open connection (Node's error codes). */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNABORTED',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
/** Class 08 (connection exception) and the server shutting down or starting (57P01-57P03). */
const CONNECTION_SQLSTATE = /^(?:08[0-9A-Z]{3}|57P0[123])$/;
/** node-postgres and the PGlite thread say these without a code. */
const CONNECTION_MESSAGE =
  /Connection terminated|timeout exceeded when trying to connect|is not queryable|the database is closed|Client was closed|Connection is closed/;
/** How deep a failure's `cause` chain is followed (CommitUnanswered wraps the driver's error). */
const CAUSE_DEPTH_MAX = 5;

/**
 * True when `error` says the database could not be reached or went away mid-statement, as
 * opposed to a statement it refused: the request did nothing wrong and may be retried as it is.
 */
export function isDatabaseUnreachable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < CAUSE_DEPTH_MAX && typeof current === 'object' && current !== null; depth += 1) {
    const { code, message, cause } = current as { code?: unknown; message?: unknown; cause?: unknown };
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || CONNECTION_SQLSTATE.test(code))) return true;
    if (typeof message === 'string' && CONNECTION_MESSAGE.test(message)) return true;
    current = cause;
  }
  return false;
}

/** A failure's kind for a log line: its code, or its message when it has none (neither carries data). */
function describe(error: unknown): string {
  if (typeof error !== 'object' || error === null) return String(error);
  const { code, message } = error as { code?: unknown; message?: unknown };
  return typeof code === 'string' ? code : String(message);
}

/**
 * One log line when the database stops answering and one when it answers again, however many
 * requests fail in between (docs/rules.md R66): requests report their failures here, and while an
 * outage lasts a probe asks the database every OUTAGE_PROBE_INTERVAL_MS until it answers.
 */
export class DatabaseOutage {
  private sinceMs: number | null = null;
  private failures = 0;
  private probe: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
  ) {}

  get active(): boolean {
    return this.sinceMs !== null;
  }

  failed(error: unknown): void {
    this.failures += 1;
    if (this.sinceMs !== null || this.stopped) return;
    this.sinceMs = Date.now();
    this.log.error(
      { event: 'database_outage_began', cause: describe(error) },
      `database unreachable: requests are answered 503 with Retry-After ${DATABASE_RETRY_AFTER_S} s until it answers again`,
    );
    this.scheduleProbe();
  }

  stop(): void {
    this.stopped = true;
    if (this.probe !== null) clearTimeout(this.probe);
    this.probe = null;
  }

  private scheduleProbe(): void {
    if (this.stopped) return;
    this.probe = setTimeout(() => void this.check(), OUTAGE_PROBE_INTERVAL_MS);
    this.probe.unref();
  }

  private async check(): Promise<void> {
    try {
      await this.sql.query('SELECT 1');
    } catch {
      this.scheduleProbe();
      return;
    }
    const durationMs = Date.now() - (this.sinceMs ?? Date.now());
    this.log.info({ event: 'database_outage_ended', durationMs, failedRequests: this.failures }, 'database answers again');
    this.sinceMs = null;
    this.failures = 0;
  }
}

/** The first pause between two tries of a start that finds no database; doubled after each, up to the max. */
const STARTUP_PAUSE_FIRST_MS = 250;
const STARTUP_PAUSE_MAX_MS = 5_000;

export class DatabaseWaitExpired extends Error {
  override readonly name = 'DatabaseWaitExpired';
}

/**
 * A start that finds the database unreachable waits for it, one JSON log line per try, for at most
 * `waitS` seconds (STARTUP_DB_WAIT_S, docs/rules.md R66), instead of exiting at once: processes
 * started with their database (a compose file, a host reboot) then come up in any order. Any other
 * failure (a wrong password, a missing database) is thrown at once. `signal` ends the wait (SIGTERM).
 */
export async function waitForDatabase(sql: Sql, options: { waitS: number; log: Logger; signal?: AbortSignal }): Promise<void> {
  const deadlineMs = Date.now() + options.waitS * 1000;
  let pauseMs = STARTUP_PAUSE_FIRST_MS;
  for (let attempt = 1; ; attempt += 1) {
    try {
      await sql.query('SELECT 1');
      if (attempt > 1) options.log.info({ event: 'database_reachable', attempts: attempt }, 'database answers; starting');
      return;
    } catch (error) {
      if (!isDatabaseUnreachable(error)) throw error;
      const leftMs = deadlineMs - Date.now();
      if (leftMs <= 0) {
        throw new DatabaseWaitExpired(`the database did not answer within STARTUP_DB_WAIT_S=${options.waitS} s (${describe(error)})`);
      }
      const nextMs = Math.min(pauseMs, leftMs);
      options.log.warn(
        { event: 'database_wait', attempt, cause: describe(error), retryInMs: nextMs },
        'database unreachable at start; waiting for it',
      );
      await sleep(nextMs, undefined, options.signal === undefined ? {} : { signal: options.signal });
      pauseMs = Math.min(pauseMs * 2, STARTUP_PAUSE_MAX_MS);
    }
  }
}
