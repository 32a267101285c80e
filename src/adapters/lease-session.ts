import { randomUUID } from 'node:crypto';
import type { LockSession, Sql } from './sql.js';

/**
 * How long a lease lasts without renewal. Its holder renews it on a heartbeat (a third of this)
 * and on every alive(), so a holder that died (SIGKILL, lost machine) is replaced after at most
 * this long, and a restarted workers process finds its predecessor's lease lapsed by the time it
 * has started (docs/rules.md R65, R68); a holder that stalls for longer may briefly lead beside
 * its successor, which the jobs' row locks make harmless.
 */
export const LEASE_MS_DEFAULT = 3_000;

/** Takes the lease when it is free, lapsed or already ours, and extends it; one statement, so no session state is needed. */
const TAKE_LEASE_SQL = `INSERT INTO leader_leases (name, holder, expires_at)
  VALUES ($1, $2::uuid, clock_timestamp() + $3::bigint * interval '1 millisecond')
  ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
   WHERE leader_leases.holder = EXCLUDED.holder OR leader_leases.expires_at < clock_timestamp()
  RETURNING holder`;

/**
 * A LockSession made of lease rows, the one election of every engine and pool mode (docs/rules.md
 * R68). Not session advisory locks: behind PgBouncer's transaction pooling a session lock would be
 * held by whichever client the server connection served last, and a process in one mode would not
 * see the lock of a process in the other. `alive()` renews every lease held and is false once one
 * was lost (it lapsed and another holder took it).
 */
export function openLeaseSession(sql: Sql, leaseMs: number = LEASE_MS_DEFAULT): LockSession {
  const holder = randomUUID();
  const held = new Set<string>();
  let ended = false;
  let heartbeat: NodeJS.Timeout | null = null;
  const take = async (name: string): Promise<boolean> => (await sql.query(TAKE_LEASE_SQL, [name, holder, leaseMs])).rowCount === 1;
  const stopHeartbeat = () => {
    if (heartbeat !== null) clearInterval(heartbeat);
    heartbeat = null;
  };
  // Between two alive() calls (a tick may be long): a lease found taken ends the session; a
  // renewal the database did not answer is left for alive() to judge.
  const beat = async () => {
    for (const name of held) {
      const kept = await take(name).catch(() => true);
      if (!kept) {
        ended = true;
        stopHeartbeat();
      }
    }
  };
  return {
    async tryLock(name) {
      if (ended) throw new Error('lease session is closed');
      const taken = await take(name);
      if (taken) held.add(name);
      if (taken && heartbeat === null) {
        heartbeat = setInterval(() => void beat(), Math.max(1, Math.floor(leaseMs / 3)));
        heartbeat.unref();
      }
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
      if (ended) stopHeartbeat();
      return !ended;
    },
    async close() {
      const names = [...held];
      ended = true;
      stopHeartbeat();
      held.clear();
      if (names.length > 0)
        await sql.query('DELETE FROM leader_leases WHERE name = ANY($1::text[]) AND holder = $2::uuid', [names, holder]).catch(() => {});
    },
  };
}
