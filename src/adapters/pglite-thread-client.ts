import { Worker } from 'node:worker_threads';
import type { PgliteAnswer, PgliteFailure, PgliteReady, PgliteRequest, PgliteThreadData } from './pglite-messages.js';
import { threadEntry } from './thread-entry.js';

const PGLITE_THREAD_ENTRY = threadEntry('./pglite-thread.js', import.meta.url);

/** A request without its id: the client numbers them. */
type Call = PgliteRequest extends infer R ? (R extends PgliteRequest ? Omit<R, 'id'> : never) : never;

interface Pending {
  resolve(answer: { rows: unknown[]; rowCount: number }): void;
  reject(error: unknown): void;
}

/** A failure carried back from the thread: with a SQLSTATE, what asDatabaseError maps like the driver's own error. */
export class PgliteThreadError extends Error {
  override readonly name = 'PgliteThreadError';

  constructor(
    readonly code: string | undefined,
    readonly constraint: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

function errorOf({ code, constraint, message }: PgliteFailure): PgliteThreadError {
  return new PgliteThreadError(code, constraint, message ?? `PGlite failed with SQLSTATE ${code}`);
}

/**
 * PGlite on a thread of its own (pglite-thread.ts), spoken to by messages. Not PGlite's own
 * PGliteWorker: that one is built for browser tabs, electing a leader among them through
 * navigator.locks and BroadcastChannel, and Node 20 has no navigator; one process with one
 * database needs only a request, its answer, and the transactions kept apart, which PGlite's
 * mutex in the thread already does.
 *
 * Requests are answered in the order they were sent. A thread that dies rejects every request
 * waiting and every one after it; none is left waiting for an answer that cannot come.
 */
export class PgliteThread {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private nextTransaction = 1;
  /** Why no request can be answered any more (the thread died, or the database was closed). */
  private gone: Error | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (answer: PgliteAnswer) => this.settle(answer));
    worker.on('error', (error) => this.fail(new Error(`the PGlite thread failed: ${error.message}`)));
    worker.on('exit', (code) => this.fail(new Error(`the PGlite thread exited (code ${code})`)));
    // An idle database does not keep the process alive, as PGlite in the main thread did not.
    worker.unref();
  }

  /** Starts the thread and opens the database in it; rejects when PGlite cannot open it. */
  static async start(dataDir: string | undefined): Promise<PgliteThread> {
    const worker = new Worker(PGLITE_THREAD_ENTRY, { workerData: { dataDir } satisfies PgliteThreadData });
    const ready = await new Promise<PgliteReady>((resolve, reject) => {
      const exited = (code: number) => reject(new Error(`the PGlite thread exited before it was ready (code ${code})`));
      worker.once('error', reject);
      worker.once('exit', exited);
      worker.once('message', (message: PgliteReady) => {
        worker.off('error', reject);
        worker.off('exit', exited);
        resolve(message);
      });
    });
    if (!ready.ready) {
      // The thread exits on its own; whatever it still reports on the way is already answered.
      worker.on('error', () => {});
      await worker.terminate();
      throw errorOf(ready.failure);
    }
    return new PgliteThread(worker);
  }

  /** The id a new transaction's statements carry; `begin` and `end` bracket them. */
  transactionId(): number {
    return this.nextTransaction++;
  }

  call(request: Call): Promise<{ rows: unknown[]; rowCount: number }> {
    if (this.gone !== undefined) return Promise.reject(this.gone);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // postMessage throws at once on a value structured clone cannot copy (a function, say).
      this.worker.postMessage({ ...request, id });
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
    });
  }

  /** Closes the database, then ends the thread; requests after it are refused. */
  async close(): Promise<void> {
    if (this.gone !== undefined) return;
    try {
      await this.call({ kind: 'close' });
    } finally {
      this.fail(new Error('the database is closed'));
      await this.worker.terminate();
    }
  }

  private settle(answer: PgliteAnswer): void {
    const pending = this.pending.get(answer.id);
    if (pending === undefined) return;
    this.pending.delete(answer.id);
    if (this.pending.size === 0) this.worker.unref();
    if (answer.ok) pending.resolve(answer);
    else pending.reject(errorOf(answer.failure));
  }

  private fail(error: Error): void {
    this.gone ??= error;
    for (const pending of this.pending.values()) pending.reject(this.gone);
    this.pending.clear();
    this.worker.unref();
  }
}
