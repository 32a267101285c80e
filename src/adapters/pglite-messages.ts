/**
 * The messages between the database adapter (pglite-thread-client.ts) and the thread that runs
 * PGlite (pglite-thread.ts). Every value crosses by structured clone, which keeps bigint, Date,
 * Uint8Array and plain objects as they are: int8 columns are parsed to bigint in the thread and
 * arrive as bigint.
 */

/** Statements of one transaction name it; `null` runs on its own (PGlite's `query` and `exec`). */
export type TransactionId = number | null;

export type PgliteRequest =
  | {
      readonly id: number;
      readonly kind: 'query';
      readonly tx: TransactionId;
      readonly text: string;
      readonly params: readonly unknown[] | undefined;
    }
  | { readonly id: number; readonly kind: 'exec'; readonly tx: TransactionId; readonly text: string }
  /** `COPY … FROM '/dev/blob'` on its own, with `rows` as the blob PGlite reads it from. */
  | { readonly id: number; readonly kind: 'copy'; readonly text: string; readonly rows: string }
  /** Opens transaction `tx` once the one before it has ended; its statements wait for it. */
  | { readonly id: number; readonly kind: 'begin'; readonly tx: number }
  /** COMMIT (or ROLLBACK) after every statement sent for `tx` before it. */
  | { readonly id: number; readonly kind: 'end'; readonly tx: number; readonly commit: boolean }
  | { readonly id: number; readonly kind: 'close' };

/** A failure without the driver's message when it has a SQLSTATE: that message may quote row values (database-error.ts). */
export interface PgliteFailure {
  readonly code: string | undefined;
  readonly constraint: string | undefined;
  readonly message: string | undefined;
}

export type PgliteAnswer =
  | { readonly id: number; readonly ok: true; readonly rows: unknown[]; readonly rowCount: number }
  | { readonly id: number; readonly ok: false; readonly failure: PgliteFailure };

/** What the thread posts once, before any answer: PGlite opened, or why it could not. */
export type PgliteReady = { readonly ready: true } | { readonly ready: false; readonly failure: PgliteFailure };

export interface PgliteThreadData {
  /** A directory on disk, or undefined for an in-memory database. */
  readonly dataDir: string | undefined;
}
