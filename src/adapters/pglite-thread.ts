import { PGlite, type Transaction } from '@electric-sql/pglite';
import { parentPort, workerData } from 'node:worker_threads';
import { assertNever } from '../assert-never.js';
import type { PgliteAnswer, PgliteFailure, PgliteReady, PgliteRequest, PgliteThreadData } from './pglite-messages.js';

/**
 * The thread that runs PGlite for one database (docs/OPERATIONS.md, Embedded PGlite).
 * PostgreSQL's WebAssembly and PGlite's wire protocol took about two thirds of the main thread
 * under load; here they have a core of their own while the main thread parses HTTP, checks
 * signatures and renders JSON. Statements run in arrival order through PGlite's own mutex, as
 * they did in the main thread: a statement outside a transaction waits while one is open.
 */
const port = parentPort;
if (port === null) throw new Error('pglite-thread.js runs as a worker thread');
const { dataDir } = workerData as PgliteThreadData;
const INT8_OID = 20;

interface OpenTransaction {
  /** The last statement sent for it: the next one, and the end, run after it. */
  last: Promise<unknown>;
  readonly started: Promise<Transaction>;
  readonly end: (commit: boolean) => void;
  /** PGlite's transaction(): settles once COMMIT or ROLLBACK has run. */
  readonly ended: Promise<void>;
}

const transactions = new Map<number, OpenTransaction>();

function failureOf(error: unknown): PgliteFailure {
  const { code, constraint } = (typeof error === 'object' && error !== null ? error : {}) as { code?: unknown; constraint?: unknown };
  const sqlstate = typeof code === 'string' ? code : undefined;
  return {
    code: sqlstate,
    constraint: typeof constraint === 'string' ? constraint : undefined,
    message: sqlstate === undefined ? String(error instanceof Error ? error.message : error) : undefined,
  };
}

function begin(db: PGlite): OpenTransaction {
  let started!: (tx: Transaction) => void;
  let notStarted!: (error: unknown) => void;
  let end!: (commit: boolean) => void;
  const startedTx = new Promise<Transaction>((resolve, reject) => {
    started = resolve;
    notStarted = reject;
  });
  const commitWanted = new Promise<boolean>((resolve) => {
    end = resolve;
  });
  const ended = db.transaction(async (tx) => {
    started(tx);
    if (!(await commitWanted)) await tx.rollback();
  });
  // A BEGIN that fails fails the statements waiting for it, rather than leaving them waiting.
  ended.catch(notStarted);
  return { last: startedTx.catch(() => {}), started: startedTx, end, ended };
}

/** A statement of transaction `open`, after the ones sent for it before. */
function inTransaction<T>(open: OpenTransaction, work: (tx: Transaction) => Promise<T>): Promise<T> {
  const result = open.last.then(() => open.started).then(work);
  open.last = result.catch(() => {});
  return result;
}

async function answer(db: PGlite, request: PgliteRequest): Promise<{ rows: unknown[]; rowCount: number } | null> {
  switch (request.kind) {
    case 'query': {
      const { text, params } = request;
      const run = (sql: Pick<PGlite, 'query'>) => sql.query(text, params as unknown[] | undefined);
      const result = request.tx === null ? await run(db) : await inTransaction(openTransaction(request.tx), run);
      // PGlite reports affectedRows only for writes; a SELECT counts its rows, as pg does.
      return { rows: result.rows, rowCount: Math.max(result.affectedRows ?? 0, result.rows.length) };
    }
    case 'exec':
      if (request.tx === null) await db.exec(request.text);
      else await inTransaction(openTransaction(request.tx), (tx) => tx.exec(request.text));
      return null;
    case 'copy': {
      const result = await db.query(request.text, [], { blob: new Blob([request.rows]) });
      return { rows: [], rowCount: result.affectedRows ?? 0 };
    }
    case 'begin': {
      if (transactions.has(request.tx)) throw new Error(`transaction ${request.tx} is already open`);
      const open = begin(db);
      transactions.set(request.tx, open);
      await open.started;
      return null;
    }
    case 'end': {
      const open = openTransaction(request.tx);
      transactions.delete(request.tx);
      await open.last;
      open.end(request.commit);
      await open.ended;
      return null;
    }
    case 'close':
      await db.close();
      return null;
    default:
      return assertNever(request);
  }
}

function openTransaction(tx: number): OpenTransaction {
  const open = transactions.get(tx);
  if (open === undefined) throw new Error(`transaction ${tx} is not open`);
  return open;
}

let db: PGlite;
try {
  db = await PGlite.create({
    ...(dataDir === undefined ? {} : { dataDir }),
    parsers: { [INT8_OID]: (value: string) => BigInt(value) },
  });
} catch (error) {
  // The failure goes back as the answer; thrown as well, it would reach the parent as a second,
  // unheard 'error' event after start() had stopped listening, and crash the process.
  port.postMessage({ ready: false, failure: failureOf(error) } satisfies PgliteReady);
  process.exit(1);
}
port.on('message', (request: PgliteRequest) => {
  answer(db, request).then(
    (result) =>
      port.postMessage({ id: request.id, ok: true, rows: result?.rows ?? [], rowCount: result?.rowCount ?? 0 } satisfies PgliteAnswer),
    (error: unknown) => port.postMessage({ id: request.id, ok: false, failure: failureOf(error) } satisfies PgliteAnswer),
  );
});
port.postMessage({ ready: true } satisfies PgliteReady);
