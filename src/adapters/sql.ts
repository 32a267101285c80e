/** The contracts every query and every leader election is written against; database.ts implements them on PGlite and PostgreSQL. */

/** The result of one statement: the rows it returned and how many rows it touched. */
export interface QueryResult<Row> {
  readonly rows: Row[];
  readonly rowCount: number;
}

/** Anything that runs SQL: the pool, or one open transaction. */
export interface Sql {
  query<Row = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<Row>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(text: string): Promise<void>;
}

/**
 * A database session kept open on purpose, because a session-level advisory lock lives exactly
 * as long as its session: when the process or its connection dies, the lock is released by the
 * server and a standby can take it. On PostgreSQL it is a dedicated connection outside the pool;
 * on PGlite (one connection per process) the locks are kept in memory between the sessions of
 * one database, which is the same guarantee within the only process that can open it.
 */
export interface LockSession {
  /** pg_try_advisory_lock on this session for `name` (scoped to the current schema). */
  tryLock(name: string): Promise<boolean>;
  /** False once the session has ended (closed, or its connection lost): its locks are gone. */
  alive(): Promise<boolean>;
  /** Ends the session, releasing its locks. */
  close(): Promise<void>;
}
