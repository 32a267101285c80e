import type { Database } from './database.js';

/**
 * Reads that requests share. A caller joins the next read to be sent, never one already on its
 * way (that one may have left before the caller's request arrived and miss a change committed in
 * between), so every caller sees the database as of a moment after it asked. One read is in flight
 * at a time: under load, each read answers every request that arrived during the previous one,
 * and the service sends a few reads per round trip instead of one per request.
 */
/**
 * When a read leaves. 'at-once': while it is on its way over the network the next one fills.
 * 'end-of-turn': it waits for the requests parsed in the same event-loop turn, for embedded
 * PGlite, which answers within the turn a read is sent in: sent at once, every read there had
 * one caller. On PostgreSQL 'end-of-turn' cost saturated throughput (docs/design.md#hot-coalesced-reads).
 */
export type Departure = 'at-once' | 'end-of-turn';

export const departureFor = (db: Pick<Database, 'kind'>): Departure => (db.kind === 'pglite' ? 'end-of-turn' : 'at-once');

export class CoalescedReads<Key, Value> {
  private next: { readonly keys: Set<Key>; readonly answer: Resolvers<ReadonlyMap<Key, Value>> } | null = null;
  private inFlight = false;
  private leaving = false;

  constructor(
    private readonly read: (keys: readonly Key[]) => Promise<ReadonlyMap<Key, Value>>,
    private readonly departure: Departure = 'at-once',
  ) {}

  load(keys: Iterable<Key>): Promise<ReadonlyMap<Key, Value>> {
    this.next ??= { keys: new Set(), answer: withResolvers() };
    for (const key of keys) this.next.keys.add(key);
    const answer = this.next.answer.promise;
    if (this.inFlight || this.leaving) return answer;
    if (this.departure === 'at-once') {
      this.send();
    } else {
      this.leaving = true;
      setImmediate(() => {
        this.leaving = false;
        this.send();
      });
    }
    return answer;
  }

  private send(): void {
    const batch = this.next;
    if (batch === null) return;
    this.next = null;
    this.inFlight = true;
    this.read([...batch.keys])
      .then(batch.answer.resolve, batch.answer.reject)
      .finally(() => {
        this.inFlight = false;
        this.send();
      });
  }
}

interface Resolvers<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (reason: unknown) => void;
}

/** Promise.withResolvers arrived in Node 22; the service runs on Node 20. */
function withResolvers<T>(): Resolvers<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
