import pg from 'pg';

/**
 * Whether the server behind `connectionString` keeps a session per client connection, asked the
 * way it would fail: two client connections open at once, each asked its backend's pid, the
 * first one twice. Straight to PostgreSQL (or PgBouncer in session pooling) each client keeps its
 * own backend, so the pids differ between clients and agree within one. Behind transaction (or
 * statement) pooling a client's statements go to whichever server connection is free, and with
 * nothing else running PgBouncer hands the same one to both clients. So the answer `false` is
 * certain; `true` can only miss a pooler that happened to be busy, and the start checks again at
 * every restart. docs/rules.md R68.
 */
export async function keepsSessions(connectionString: string): Promise<boolean> {
  const first = new pg.Client({ connectionString });
  const second = new pg.Client({ connectionString });
  try {
    await first.connect();
    await second.connect();
    const pid = async (client: pg.Client) => (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    const firstPid = await pid(first);
    const secondPid = await pid(second);
    const firstAgain = await pid(first);
    return firstPid !== secondPid && firstPid === firstAgain;
  } finally {
    await Promise.all([first.end().catch(() => {}), second.end().catch(() => {})]);
  }
}

/** The start's refusal: session state the service relies on would be lost, one request at a time. */
export const SESSION_POOLING_REQUIRED =
  'DATABASE_URL reaches a pooler in transaction pooling mode (PgBouncer?): set DATABASE_POOL_MODE=transaction, or point DATABASE_URL at PostgreSQL or a session-pooling PgBouncer (docs/OPERATIONS.md, PgBouncer)';
