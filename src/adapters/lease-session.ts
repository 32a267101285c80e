import { randomUUID } from 'node:crypto';
import type { LockSession, Sql } from './sql.js';

/**
 * How long a lease lasts without renewal. The outbox leader renews on every run (each second by
 * default), so a leader that died is replaced after at most this long; a leader that stalls for
 * longer may briefly lead beside its successor, which the jobs' row locks make harmless.
 */
export const LEASE_MS_DEFAULT = 15_000;

/** Takes the lease when it is free, lapsed or already ours, and extends it; one statement, so no session state is needed. */
const TAKE_LEASE_SQL = `INSERT INTO leader_leases (name, holder, expires_at)
  VALUES ($1, $2::uuid, clock_timestamp() + $3::bigint * interval '1 millisecond')
  ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
   WHERE leader_leases.holder = EXCLUDED.holder OR leader_leases.expires_at < clock_timestamp()
  RETURNING holder`;

/**
 * A LockSession made of lease rows instead of session advisory locks, for connections that
 * PgBouncer's transaction pooling hands from client to client: a session lock would be held by
 * whichever client the server connection served last. `alive()` renews every lease held and is
 * false once one was lost (it lapsed and another holder took it).
 */
export function openLeaseSession(sql: Sql, leaseMs: number = LEASE_MS_DEFAULT): LockSession {
  const holder = randomUUID();
  const held = new Set<string>();
  let ended = false;
  const take = async (name: string): Promise<boolean> => (await sql.query(TAKE_LEASE_SQL, [name, holder, leaseMs])).rowCount === 1;
  return {
    async tryLock(name) {
      if (ended) throw new Error('lease session is closed');
      const taken = await take(name);
      if (taken) held.add(name);
      return taken;
    },
    async alive() {
      if (ended) return false;
      try {
        for (const name of held) if (!(await take(name))) ended = true;
      } catch {
        // The database did not answer: the lease may lapse meanwhile, so this holder stands down.
        ended = true;
      }
      return !ended;
    },
    async close() {
      const names = [...held];
      ended = true;
      held.clear();
      if (names.length > 0)
        await sql.query('DELETE FROM leader_leases WHERE name = ANY($1::text[]) AND holder = $2::uuid', [names, holder]).catch(() => {});
    },
  };
}
