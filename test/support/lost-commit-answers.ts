import type { Database } from '../../src/adapters/database.js';

/** How many items (intents opened, invoices claimed) a statement of a batch carries; null: none. */
export type ItemsOf = (text: string, params: readonly unknown[] | undefined) => number | null;

export interface LostCommitAnswers {
  /** The database to build the app on. */
  readonly db: Database;
  /** The next transaction that carries at least `batchMin` items loses its COMMIT's answer. */
  arm(batchMin?: number): void;
  /** Still armed: no transaction has met the loss yet. */
  readonly armed: boolean;
}

/**
 * A database whose next transaction of a batch, once armed, commits and then fails as a cut
 * connection does: the COMMIT went through, its answer never came.
 */
export function losingCommitAnswers(inner: Database, itemsOf: ItemsOf): LostCommitAnswers {
  const armed = { batchMin: null as number | null };
  const db: Database = {
    ...inner,
    async transaction(work) {
      let items = 0;
      const result = await inner.transaction((tx) =>
        work({
          query: (text, params) => {
            items = Math.max(items, itemsOf(text, params) ?? 0);
            return tx.query(text, params);
          },
          send: (text, params) => {
            items = Math.max(items, itemsOf(text, params) ?? 0);
            tx.send(text, params);
          },
          exec: (text) => tx.exec(text),
        }),
      );
      if (armed.batchMin !== null && items >= armed.batchMin) {
        armed.batchMin = null;
        throw new Error('Connection terminated unexpectedly');
      }
      return result;
    },
  };
  return {
    db,
    arm(batchMin = 1) {
      armed.batchMin = batchMin;
    },
    get armed() {
      return armed.batchMin !== null;
    },
  };
}
