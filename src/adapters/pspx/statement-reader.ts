/**
 * Reads a PSPX daily statement (GET /v1/statements/{YYYYMMDD}) as a stream: a day of a busy
 * provider is a million lines, so the body is split into lines as it arrives
 * (statement-splitter.ts), each parsed and checked, and handed on in batches, and memory stays flat whatever the day's size. Every field is checked
 * against the contract here, at the edge: what leaves this file is integers (bigint) and known
 * words, never a provider's string taken on trust.
 */
import { TextDecoder } from 'node:util';
import { StatementSplitter, StatementTextError } from './statement-splitter.js';

/** The client's Unknown (pspx-client.ts), spelt here so that the client may import this file and not the reverse. */
type Unknown = { readonly kind: 'unknown'; readonly cause: 'timeout' | 'network' | 'http_5xx' | 'bad_response'; readonly detail: string };

export const STATEMENT_LINE_TYPES = ['PAYOUT', 'RETURN', 'FEE', 'ADJUSTMENT'] as const;
export type StatementLineType = (typeof STATEMENT_LINE_TYPES)[number];

export interface StatementLine {
  readonly lineId: string;
  /** Null on a line the provider made itself (a fee, an adjustment). */
  readonly intentId: string | null;
  readonly type: StatementLineType;
  /** Satang, positive. */
  readonly amount: bigint;
  readonly valueDate: string;
}

export interface StatementHeader {
  readonly date: string;
  readonly openingBalance: bigint;
  readonly closingBalance: bigint;
  readonly lineCount: number;
}

/** Where the lines go. `begin` starts an attempt (a retry starts again); `lines` is awaited before more is read. */
export interface StatementSink {
  begin(): Promise<void>;
  lines(batch: readonly StatementLine[]): Promise<void>;
}

export type StreamOutcome =
  | { readonly kind: 'closed'; readonly header: StatementHeader }
  | { readonly kind: 'not_closed' }
  | { readonly kind: 'invalid'; readonly reason: string }
  | Unknown;

/** Lines handed to the sink at once: one COPY of the staging table per batch. */
export const STATEMENT_BATCH_SIZE_MAX = 5000;
export const LINE_ID_LENGTH_MAX = 100;
/** The ledger's amounts are bigint (signed 64-bit): a larger one cannot be any payout of ours. */
const INT64_MAX = 9_223_372_036_854_775_807n;
const POSITIVE_SATANG = /^[1-9][0-9]{0,18}$/;
const SIGNED_SATANG = /^-?(?:0|[1-9][0-9]{0,18})$/;
// A lineId is an identifier: a tab, a newline or a NUL in one is a provider's fault, not a name.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const STATEMENT_DATE = /^[0-9]{8}$/;

class InvalidStatement extends Error {}

const fail = (reason: string): never => {
  throw new InvalidStatement(reason);
};

function positiveSatang(value: unknown, what: string): bigint {
  if (typeof value !== 'string' || !POSITIVE_SATANG.test(value)) return fail(`${what} is not a positive integer string of satang`);
  const amount = BigInt(value);
  return amount <= INT64_MAX ? amount : fail(`${what} exceeds the 64-bit range`);
}

function signedSatang(value: unknown, what: string): bigint {
  if (typeof value !== 'string' || !SIGNED_SATANG.test(value)) return fail(`${what} is not an integer string of satang`);
  const amount = BigInt(value);
  return amount <= INT64_MAX && amount >= -INT64_MAX ? amount : fail(`${what} exceeds the 64-bit range`);
}

/** One line of the contract, or the reason it is not one. */
export function parseStatementLine(raw: unknown, index: number): StatementLine {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return fail(`line ${index} is not an object`);
  const line = raw as Record<string, unknown>;
  const { lineId, intentId, type, amount, valueDate } = line;
  if (typeof lineId !== 'string' || lineId.length === 0 || lineId.length > LINE_ID_LENGTH_MAX || CONTROL_CHARACTER.test(lineId))
    return fail(`line ${index}: lineId must be a string of 1 to ${LINE_ID_LENGTH_MAX} characters, none of them a control character`);
  if (intentId !== null && intentId !== undefined && (typeof intentId !== 'string' || !UUID.test(intentId)))
    return fail(`line ${lineId}: intentId must be a UUID or null`);
  if (!STATEMENT_LINE_TYPES.includes(type as StatementLineType))
    return fail(`line ${lineId}: type must be one of ${STATEMENT_LINE_TYPES.join(', ')}`);
  if (typeof valueDate !== 'string' || !STATEMENT_DATE.test(valueDate)) return fail(`line ${lineId}: valueDate must be YYYYMMDD`);
  return {
    lineId,
    intentId: typeof intentId === 'string' ? intentId.toLowerCase() : null,
    type: type as StatementLineType,
    amount: positiveSatang(amount, `line ${lineId}: amount`),
    valueDate,
  };
}

export interface StreamRequest {
  readonly url: string;
  readonly date: string;
  /** The longest wait for the answer to start, and for each next piece of its body. */
  readonly idleTimeoutMs: number;
  readonly sink: StatementSink;
}

/** One attempt: fetches, parses and forwards; a failure of the sink is thrown, not turned into an outcome. */
export async function streamStatement(request: StreamRequest): Promise<StreamOutcome> {
  const aborter = new AbortController();
  let timer = setTimeout(() => aborter.abort(), request.idleTimeoutMs);
  const rearm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => aborter.abort(), request.idleTimeoutMs);
  };
  const what = `GET statement ${request.date}`;
  try {
    let response: Response;
    try {
      response = await fetch(request.url, { headers: { accept: 'application/json' }, signal: aborter.signal });
    } catch (error) {
      return networkOutcome(error, aborter.signal, what, request.idleTimeoutMs);
    }
    if (response.status >= 500) {
      await response.body?.cancel();
      return { kind: 'unknown', cause: 'http_5xx', detail: `${what} answered ${response.status}` };
    }
    if (response.status === 404) {
      await response.body?.cancel();
      return { kind: 'not_closed' };
    }
    if (response.status !== 200 || response.body === null) {
      await response.body?.cancel();
      return { kind: 'unknown', cause: 'bad_response', detail: `${what} answered ${response.status}` };
    }
    return await readBody(response.body, request, rearm, aborter.signal, what);
  } finally {
    clearTimeout(timer);
  }
}

async function readBody(
  body: ReadableStream<Uint8Array>,
  request: StreamRequest,
  rearm: () => void,
  aborted: AbortSignal,
  what: string,
): Promise<StreamOutcome> {
  let batch: StatementLine[] = [];
  const splitter = new StatementSplitter((text, index) => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw new StatementTextError('the statement is not valid JSON');
    }
    batch.push(parseStatementLine(value, index));
  });
  // A multi-byte character split between two pieces of the body is decoded whole.
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const reader = body.getReader();
  let header: Record<string, unknown>;
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (error) {
        return networkOutcome(error, aborted, what, request.idleTimeoutMs);
      }
      if (chunk.done) break;
      rearm();
      splitter.write(decodeUtf8(decoder, chunk.value));
      if (batch.length >= STATEMENT_BATCH_SIZE_MAX) {
        const full = batch;
        batch = [];
        await request.sink.lines(full);
      }
    }
    splitter.write(decodeUtf8(decoder));
    header = splitter.end();
  } catch (error) {
    if (error instanceof StatementTextError || error instanceof InvalidStatement) return { kind: 'invalid', reason: error.message };
    throw error;
  } finally {
    reader.releaseLock();
  }
  if (batch.length > 0) await request.sink.lines(batch);
  try {
    if (header.date !== request.date) fail(`the statement is dated ${String(header.date)}, not ${request.date}`);
    return {
      kind: 'closed',
      header: {
        date: request.date,
        openingBalance: signedSatang(header.openingBalance, 'openingBalance'),
        closingBalance: signedSatang(header.closingBalance, 'closingBalance'),
        lineCount: splitter.lines,
      },
    };
  } catch (error) {
    if (error instanceof InvalidStatement) return { kind: 'invalid', reason: error.message };
    throw error;
  }
}

/** The next piece of text; without `piece`, the end of the body. */
function decodeUtf8(decoder: TextDecoder, piece?: Uint8Array): string {
  try {
    return piece === undefined ? decoder.decode() : decoder.decode(piece, { stream: true });
  } catch {
    // The decoder's fatal mode: bytes that are not UTF-8.
    throw new StatementTextError('the statement is not valid UTF-8');
  }
}

function networkOutcome(error: unknown, aborted: AbortSignal, what: string, idleTimeoutMs: number): Unknown {
  if (aborted.aborted) return { kind: 'unknown', cause: 'timeout', detail: `${what}: nothing received for ${idleTimeoutMs} ms` };
  return { kind: 'unknown', cause: 'network', detail: `${what}: ${error instanceof Error ? error.message : String(error)}` };
}
