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
 * One contender in a leader election: lease rows in the database (lease-session.ts), the same on
 * every engine and in either pool mode (docs/rules.md R68), so that every process contends for
 * the same row whatever its DATABASE_POOL_MODE.
 */
export interface LockSession {
  /** Takes the named lease when it is free, lapsed or already this session's. */
  tryLock(name: string): Promise<boolean>;
  /** Renews what it holds; false once a lease was lost (it lapsed and another took it) or the session closed. */
  alive(): Promise<boolean>;
  /** Ends the session, handing its leases back at once. */
  close(): Promise<void>;
}
