import { isStampRefusal } from '../../../ledger/ledger.js';
import { CommitUnanswered } from './commit-unanswered.js';

/**
 * Group commit: work items that arrive while earlier batches are being committed wait and go
 * together in the next batch. Nothing waits for a timer: an item that finds a free flush slot
 * starts one at once, so an idle service answers as fast as without batching, and a busy one
 * pays the per-transaction cost once per batch.
 *
 * A batch that fails as a whole is retried item by item, so one item that cannot commit (or a
 * deadlock between batches) answers only for itself. When the batch's COMMIT went unanswered, an
 * item whose retry fails too may be stored all the same, and says so (CommitUnanswered). A batch
 * whose COMMIT balance history's stamp check refused (it stalled between its ledger write and its
 * COMMIT) stored nothing and says nothing against any item: a batch of one is tried once more too.
 */
export interface GroupCommitOptions<Item> {
  readonly batchMax: number;
  /** Batches being committed at once. */
  readonly flushesMax: number;
  /**
   * Items that share a key never go into one batch: the later one waits for the next, so it sees
   * the earlier one's outcome as it would one after the other.
   */
  readonly keysOf?: (item: Item) => readonly string[];
  /**
   * What an item's commit locks in the database (a guarded wallet's balance row, say). An item
   * waits here while a batch in flight holds one of its lock keys, instead of waiting in the
   * database on that batch's row lock while holding its own batch's locks and connection; items
   * that share a lock key may still go in one batch.
   */
  readonly lockKeysOf?: (item: Item) => readonly string[];
  /**
   * How long a free flush slot waits for more items before it takes a batch (ms; default 0: it
   * takes what is waiting at once). For a database that runs one statement at a time (PGlite),
   * where the requests behind a batch are still reading while it commits.
   */
  readonly gatherMs?: number;
}

interface Waiting<Item, Outcome> {
  readonly item: Item;
  readonly resolve: (outcome: Outcome) => void;
  readonly reject: (error: unknown) => void;
}

export class GroupCommit<Item, Outcome> {
  private readonly waiting: Array<Waiting<Item, Outcome>> = [];
  private flushing = 0;
  /** The lock keys of the batches being committed; a key belongs to one batch at most. */
  private readonly locked = new Set<string>();
  private gathering: NodeJS.Timeout | null = null;

  constructor(
    private readonly flush: (batch: readonly Item[]) => Promise<Outcome[]>,
    private readonly options: GroupCommitOptions<Item>,
  ) {}

  submit(item: Item): Promise<Outcome> {
    return new Promise<Outcome>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.startFlushes();
    });
  }

  private startFlushes(): void {
    const gatherMs = this.options.gatherMs ?? 0;
    if (gatherMs > 0) {
      if (this.gathering === null && this.flushing < this.options.flushesMax && this.waiting.length > 0) {
        this.gathering = setTimeout(() => {
          this.gathering = null;
          this.flushNow();
        }, gatherMs);
      }
      return;
    }
    this.flushNow();
  }

  private flushNow(): void {
    while (this.flushing < this.options.flushesMax && this.waiting.length > 0) {
      const batch = this.takeBatch();
      // Everything waiting needs a key that a batch in flight holds; its end starts the next.
      if (batch.length === 0) return;
      const lockKeys = new Set(batch.flatMap((entry) => this.options.lockKeysOf?.(entry.item) ?? []));
      for (const key of lockKeys) this.locked.add(key);
      this.flushing += 1;
      void this.commit(batch).finally(() => {
        for (const key of lockKeys) this.locked.delete(key);
        this.flushing -= 1;
        this.startFlushes();
      });
    }
  }

  /**
   * The oldest items, up to batchMax, skipping those that share a key with an earlier item or a
   * lock key with a batch in flight.
   */
  private takeBatch(): Array<Waiting<Item, Outcome>> {
    const { keysOf, lockKeysOf } = this.options;
    const batch: Array<Waiting<Item, Outcome>> = [];
    const taken = new Set<string>();
    for (let i = 0; i < this.waiting.length && batch.length < this.options.batchMax; ) {
      const entry = this.waiting[i]!;
      const keys = keysOf?.(entry.item) ?? [];
      const blocked = keys.some((key) => taken.has(key)) || (lockKeysOf?.(entry.item) ?? []).some((key) => this.locked.has(key));
      // A skipped item's keys stay held too, so items that share a key keep their order.
      for (const key of keys) taken.add(key);
      if (blocked) {
        i += 1;
        continue;
      }
      batch.push(entry);
      this.waiting.splice(i, 1);
    }
    return batch;
  }

  private async commit(batch: ReadonlyArray<Waiting<Item, Outcome>>): Promise<void> {
    try {
      const outcomes = await this.flush(batch.map((entry) => entry.item));
      batch.forEach((entry, index) => {
        entry.resolve(outcomes[index]!);
      });
    } catch (error) {
      if (batch.length === 1 && !isStampRefusal(error)) {
        batch[0]!.reject(error);
        return;
      }
      const batchMayHaveCommitted = error instanceof CommitUnanswered;
      for (const entry of batch) {
        await this.flush([entry.item]).then(
          ([outcome]) => entry.resolve(outcome!),
          (alone: unknown) =>
            entry.reject(batchMayHaveCommitted && !(alone instanceof CommitUnanswered) ? new CommitUnanswered(alone) : alone),
        );
      }
    }
  }
}
