import type { Database } from '../../src/adapters/database.js';

export interface GoneAtBegin {
  /** The database to build the app on. */
  readonly db: Database;
  /** The database goes away at the next transaction's BEGIN. */
  arm(): void;
  /** It is back. */
  end(): void;
  /** The statements asked since it went away, BEGIN included. */
  readonly asked: readonly string[];
}

/**
 * A database that, once armed, goes away at the next transaction's BEGIN, before anything of that
 * transaction is written or any COMMIT sent: from then on, until the test ends the outage, every
 * statement fails at once as on a lost connection, and is kept.
 */
export function goneAtNextBegin(inner: Database): GoneAtBegin {
  const outage = { armed: false, on: false };
  const asked: string[] = [];
  const fail = (text: string) => {
    asked.push(text);
    return Promise.reject(new Error('Connection terminated unexpectedly'));
  };
  const db: Database = {
    ...inner,
    query: (text, params) => (outage.on ? fail(text) : inner.query(text, params)),
    transaction(work) {
      outage.on ||= outage.armed;
      outage.armed = false;
      return outage.on ? fail('BEGIN') : inner.transaction(work);
    },
  };
  return {
    db,
    arm() {
      asked.length = 0;
      outage.armed = true;
    },
    end() {
      outage.armed = false;
      outage.on = false;
    },
    asked,
  };
}
