import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFromStdin } from 'pg-copy-streams';
import { asDatabaseError } from './database-error.js';
import { trace } from '@opentelemetry/api';
import { openLeaseSession } from './lease-session.js';
import type { LockSession, Sql } from './sql.js';
import type { TransactionId } from './pglite-messages.js';
import { PgliteThread } from './pglite-thread-client.js';
import { inSpan } from './tracing.js';

export type { LockSession, QueryResult, Sql } from './sql.js';

/** R51: `transaction` when the database is reached through PgBouncer in transaction pooling mode. */
export const DATABASE_POOL_MODES = ['session', 'transaction'] as const;
export type DatabasePoolMode = (typeof DATABASE_POOL_MODES)[number];

/** One open transaction. */
export interface Tx extends Sql {
  /**
   * Sends a statement whose answer the work does not need. It is not waited for: on PostgreSQL
   * the COMMIT goes out right behind it, in the same round trip. If it fails, the transaction
   * fails (rolled back, and `transaction` throws its error), as if it had been awaited.
   */
  send(text: string, params?: readonly unknown[]): void;
}

export interface Database extends Sql {
  readonly kind: 'pglite' | 'postgres';
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /** A contender for leader election (see LockSession: lease rows in either pool mode); the caller closes it. */
  openLockSession(): Promise<LockSession>;
  /**
   * Loads `rows` (COPY's text format: one row a line, columns separated by tabs, `\N` for null)
   * into `table`'s `columns` with one COPY, in a transaction of its own; returns the rows loaded.
   * A bulk load's fastest path on both engines: no statement per row, and no parameters to bind.
   * `table` and `columns` are the code's own names, never input.
   */
  copyRows(table: string, columns: readonly string[], rows: string): Promise<number>;
  /** The connection pool's counts on PostgreSQL; absent on PGlite, which has one connection. */
  readonly poolStats?: () => PoolStats;
  close(): Promise<void>;
}

export interface PoolStats {
  /** Connections open, in use or idle. */
  readonly total: number;
  readonly idle: number;
  /** Queries and transactions waiting for a connection: the pool is too small, or the database too slow. */
  readonly waiting: number;
}

const INT8_OID = 20;
const connectionsMax = 20;
/**
 * How long a request waits for a new connection. Without it a connect into a network partition
 * (SYN answered by nothing) waits forever and so does the request that needs it.
 */
const connectTimeoutMs = 5_000;

/**
 * `postgres://…` opens a pool on that server; `memory://` an in-memory PGlite; unset, a PGlite
 * in `dataDir`. int8 columns come back as bigint on both, so money never passes through a float.
 * `transaction` pool mode (PgBouncer's transaction pooling) keeps no state in a session: statements
 * go unnamed. Leadership is a lease row (lease-session.ts) in both modes.
 */
export async function openDatabase(
  databaseUrl: string | undefined,
  dataDir: string,
  poolMode: DatabasePoolMode = 'session',
): Promise<Database> {
  const database = await openByScheme(databaseUrl, dataDir, poolMode);
  // One election whatever the pool mode (docs/rules.md R68): processes with and without
  // DATABASE_POOL_MODE=transaction that overlap during a switch-over contend for the same lease row.
  return { ...database, openLockSession: async () => openLeaseSession(database) };
}

/** A database before its lock sessions are attached: the same lease rows on every engine. */
type Engine = Omit<Database, 'openLockSession'>;

async function openByScheme(databaseUrl: string | undefined, dataDir: string, poolMode: DatabasePoolMode): Promise<Engine> {
  if (databaseUrl?.startsWith('postgres://') || databaseUrl?.startsWith('postgresql://')) {
    return openPostgres(databaseUrl, poolMode === 'session');
  }
  if (databaseUrl !== undefined && databaseUrl !== '' && databaseUrl !== 'memory://') {
    throw new Error(`DATABASE_URL must start with postgres://, postgresql:// or memory:// (got a different scheme)`);
  }
  return openPglite(databaseUrl === 'memory://' ? undefined : dataDir);
}

const pgTypes = {
  getTypeParser: (oid: number, format?: string) =>
    oid === INT8_OID ? (value: string) => BigInt(value) : pg.types.getTypeParser(oid, format as 'text'),
};

/**
 * Statements with parameters go out as named prepared statements, so that each connection parses
 * a text once, and PostgreSQL may keep a generic plan after five runs, instead of parsing and
 * planning on every call: a policy evaluation's facts query spent more time being planned than
 * run. The names are the process's own (one per distinct text); past the cap, texts go unnamed,
 * so that a caller building texts dynamically cannot grow every connection's statement cache.
 */
const statementNames = new Map<string, string>();
const NAMED_STATEMENTS_MAX = 500;

const PLANNED_EACH_CALL = '/* planned at each call */ ';

/**
 * A statement that goes out unnamed, so PostgreSQL plans it with the table as it is at each call.
 * For lookups by key on a table that grows from empty: a generic plan made while it was small is a
 * sequential scan, and without ANALYZE (autovacuum off, after a restore) nothing ever replaces it
 * (docs/design.md#hot-stable-plans). Planning such a lookup costs tens of microseconds.
 */
export const plannedEachCall = (text: string): string => PLANNED_EACH_CALL + text;

function statementName(text: string): string | undefined {
  if (text.startsWith(PLANNED_EACH_CALL)) return undefined;
  let name = statementNames.get(text);
  if (name === undefined && statementNames.size < NAMED_STATEMENTS_MAX) {
    name = `payorch_${statementNames.size + 1}`;
    statementNames.set(text, name);
  }
  return name;
}

/**
 * Statements sent without waiting for the answers before them (`Tx.send`): their failures are
 * kept, and checked before the transaction's outcome is reported.
 */
class Unawaited {
  private readonly sent: Array<Promise<unknown>> = [];

  add(statement: Promise<unknown>): void {
    // Handled here, so a failure before `settle` is not an unhandled rejection.
    statement.catch(() => {});
    this.sent.push(statement);
  }

  /** Throws the first failure among the statements sent. */
  async settle(): Promise<void> {
    await Promise.all(this.sent);
  }
}

/**
 * pg-pool takes its error listener off a client when it hands it out, and the borrower can attach
 * its own only a turn later (after `await pool.connect()`). A server that shuts down (fast or
 * immediate stop, failover) sends its FATAL right behind the answer that freed the client, in the
 * same read: the client emits 'error' with no listener in between, and that throws out of the
 * socket's read, ending the process. Each client keeps one listener for life; its failure still
 * reaches the pool and the borrower through their own listeners, and the client is not queryable
 * any more, so the pool discards it when it comes back.
 */
function keepClientErrorsHandled(pool: pg.Pool): void {
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
}

/** `namedStatements` false: PgBouncer in transaction mode may run the next statement on a connection that never prepared it. */
function openPostgres(connectionString: string, namedStatements: boolean): Engine {
  const pool = new pg.Pool({
    connectionString,
    max: connectionsMax,
    connectionTimeoutMillis: connectTimeoutMs,
    // A server that vanished without a FIN is noticed on idle and busy connections alike.
    keepAlive: true,
    types: pgTypes,
    // A statement goes out without waiting for the answer to the one before, which is still
    // answered first: BEGIN travels with a transaction's first statement and COMMIT with its
    // last, two round trips fewer per transaction (docs/design.md#hot-pipelining).
    pipeline: true,
  });
  // An idle client that loses its server (restart, failover) must not crash the process.
  pool.on('error', () => {});
  keepClientErrorsHandled(pool);
  // COPY is a custom query, which pg refuses on a pipelined connection: bulk loads have a small
  // pool of their own, opened on the first load.
  let copyPool: pg.Pool | undefined;
  const run = async <Row>(client: pg.Pool | pg.PoolClient, text: string, params?: readonly unknown[]) => {
    const name = params === undefined || !namedStatements ? undefined : statementName(text);
    try {
      const result =
        name === undefined
          ? await client.query(text, params as unknown[] | undefined)
          : await client.query({ text, values: params as unknown[], name });
      return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
    } catch (error) {
      throw asDatabaseError(error, text);
    }
  };
  return {
    kind: 'postgres',
    query: (text, params) => run(pool, text, params),
    exec: async (text) => {
      await pool.query(text).catch((error: unknown) => {
        throw asDatabaseError(error, text);
      });
    },
    async transaction(work) {
      const client = await pool.connect();
      // A connection lost between two statements of this transaction: the next statement fails,
      // and the client is given back as broken, to be discarded.
      let lost: Error | undefined;
      const onLost = (error: Error) => {
        lost = error;
      };
      client.on('error', onLost);
      const unawaited = new Unawaited();
      try {
        // Not awaited: the first statement of the work follows it in the same round trip. A
        // BEGIN that fails means a lost connection, on which the statements after it fail too.
        unawaited.add(client.query('BEGIN'));
        const result = await work({
          query: (text, params) => run(client, text, params),
          send: (text, params) => unawaited.add(run(client, text, params)),
          exec: async (text) => {
            await client.query(text).catch((error: unknown) => {
              throw asDatabaseError(error, text);
            });
          },
        });
        const commit = client.query('COMMIT');
        // Handled here as well: when a sent statement's failure is thrown first, nothing awaits
        // the COMMIT, whose own failure (the connection gone) would be an unhandled rejection.
        commit.catch(() => {});
        // A statement that failed aborted the transaction, and PostgreSQL answers the COMMIT of an
        // aborted transaction with ROLLBACK, not with an error.
        await unawaited.settle();
        const { command } = await commit;
        if (command !== 'COMMIT') throw new Error(`COMMIT answered ${command}`);
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        // BEGIN and COMMIT are the only statements not sent through run().
        throw asDatabaseError(error, 'COMMIT');
      } finally {
        client.off('error', onLost);
        client.release(lost);
      }
    },
    async copyRows(table, columns, rows) {
      const text = `COPY ${table} (${columns.join(', ')}) FROM STDIN`;
      if (copyPool === undefined) {
        copyPool = new pg.Pool({ connectionString, max: 2, connectionTimeoutMillis: connectTimeoutMs, keepAlive: true, types: pgTypes });
        copyPool.on('error', () => {});
        keepClientErrorsHandled(copyPool);
      }
      const client = await copyPool.connect();
      let broken: unknown;
      try {
        const copy = client.query(copyFromStdin(text));
        await pipeline(Readable.from([rows]), copy);
        return copy.rowCount;
      } catch (error) {
        broken = error;
        throw asDatabaseError(error, text);
      } finally {
        // A COPY that failed midway may leave the connection out of step: it is not reused.
        client.release(broken === undefined ? undefined : true);
      }
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: async () => {
      await Promise.all([pool.end(), copyPool?.end()]);
    },
  };
}

/**
 * PGlite runs on a thread of its own (pglite-thread-client.ts): the database's work and the
 * app's run on two cores. Its one connection runs one transaction at a time; statements outside
 * it wait in the thread, as they did in the main thread.
 */
async function openPglite(dataDir: string | undefined): Promise<Engine> {
  const thread = await PgliteThread.start(dataDir);
  const query = async <Row>(tx: TransactionId, text: string, params?: readonly unknown[]) => {
    try {
      const { rows, rowCount } = await thread.call({ kind: 'query', tx, text, params });
      return { rows: rows as Row[], rowCount };
    } catch (error) {
      throw asDatabaseError(error, text);
    }
  };
  // pg's instrumentation traces PostgreSQL's statements; PGlite's are traced here, alike, and only
  // inside a trace (a request or a worker step), as pg's is configured: no trace per poll.
  const run = <Row>(tx: TransactionId, text: string, params?: readonly unknown[]) =>
    trace.getActiveSpan() === undefined
      ? query<Row>(tx, text, params)
      : inSpan(statementSpanName(text), { 'db.system.name': 'postgresql', 'db.query.text': text }, () => query<Row>(tx, text, params));
  const exec = async (tx: TransactionId, text: string) => {
    await thread.call({ kind: 'exec', tx, text }).catch((error: unknown) => {
      throw asDatabaseError(error, text);
    });
  };
  return {
    kind: 'pglite',
    query: (text, params) => run(null, text, params),
    exec: (text) => exec(null, text),
    async transaction(work) {
      const tx = thread.transactionId();
      const unawaited = new Unawaited();
      // Not awaited, as on PostgreSQL: the thread runs the work's statements once BEGIN has.
      unawaited.add(thread.call({ kind: 'begin', tx }));
      let ended = false;
      try {
        const result = await work({
          query: (text, params) => run(tx, text, params),
          send: (text, params) => unawaited.add(run(tx, text, params)),
          exec: (text) => exec(tx, text),
        });
        // COMMIT leaves behind the statements sent and not awaited, in the same turn: when one of
        // them failed, the COMMIT of the aborted transaction fails too, and the first failure is thrown.
        ended = true;
        const commit = thread.call({ kind: 'end', tx, commit: true });
        unawaited.add(commit);
        await unawaited.settle();
        return result;
      } catch (error) {
        if (!ended) await thread.call({ kind: 'end', tx, commit: false }).catch(() => {});
        // BEGIN and COMMIT are the only statements not sent through run().
        throw asDatabaseError(error, 'COMMIT');
      }
    },
    async copyRows(table, columns, rows) {
      const text = `COPY ${table} (${columns.join(', ')}) FROM '/dev/blob'`;
      try {
        return (await thread.call({ kind: 'copy', text, rows })).rowCount;
      } catch (error) {
        throw asDatabaseError(error, text);
      }
    },
    close: async () => {
      await thread.close();
    },
  };
}

/** `SELECT`, `INSERT`…: the statement's first word, as pg's instrumentation names its spans. */
function statementSpanName(text: string): string {
  return /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? 'SQL';
}
