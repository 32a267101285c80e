import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import pino from 'pino';
import { asDatabaseError } from '../adapters/database-error.js';
import { traceLogFields } from '../adapters/tracing.js';

export interface LogSettings {
  readonly level: string;
  /** Where the JSON lines go; standard output when absent. */
  readonly stream?: { write(line: string): void };
}

/** Headers that carry or prove a secret; Fastify's request serializer leaves headers out, these guard any other path. */
const SECRET_HEADERS = ['authorization', 'x-signature', 'signature', 'cookie'];
const CAUSES_MAX = 3;

type SerializedError = { type: string; message: string; stack: string; [field: string]: unknown };
type LoggerOptions = Exclude<FastifyServerOptions['logger'], boolean | undefined>;

/**
 * An error as a log line may show it: its type, message, stack, code and the names a reader needs,
 * never its other properties. pino's standard serializer copies every enumerable property, and a
 * driver's error carries the SQL text, its parameters and row values (docs/SECURITY.md §8).
 */
export function serializeError(error: unknown, depth = 0): SerializedError {
  if (!(error instanceof Error)) return { type: typeof error, message: '', stack: '' };
  const safe = asDatabaseError(error, 'unnamed statement');
  const shown = safe instanceof Error ? safe : error;
  const fields: SerializedError = { type: shown.name, message: shown.message, stack: shown.stack ?? '' };
  const { code, statement, constraint, reason } = shown as { code?: unknown; statement?: unknown; constraint?: unknown; reason?: unknown };
  for (const [name, value] of Object.entries({ code, statement, constraint, reason })) {
    if (typeof value === 'string' || typeof value === 'number') fields[name] = value;
  }
  if (shown.cause !== undefined && depth < CAUSES_MAX) fields.cause = serializeError(shown.cause, depth + 1);
  return fields;
}

/** The one logger configuration of the service: the API and every worker log through it. */
export function loggerOptions(settings: LogSettings): LoggerOptions {
  return {
    level: settings.level,
    // Each line written before the call returns, as Node writes to a pipe on Linux: no line is lost
    // when the process dies. pino's default buffers while a write is in flight and measures the
    // buffer again at every line, ~7 KB of garbage per line on a busy process against ~2 KB
    // (docs/perf-log/2026-11.md, "payorch's allocation and CPU per intent").
    stream: settings.stream ?? pino.destination({ dest: 1, sync: true }),
    redact: { paths: SECRET_HEADERS.map((name) => `req.headers["${name}"]`), censor: '[redacted]' },
    serializers: { err: (error) => serializeError(error) },
    // trace_id/span_id of the active span, when tracing is on: a log line leads to its trace.
    mixin: traceLogFields,
  };
}

/**
 * Adds fields to every later line of one request, the lines of its reply too. Fastify gives each
 * request a logger of its own, which takes them in place: a child of it would make that logger a
 * prototype, which V8 pays for on every request (a payment's logging cost 26–32 µs with two such
 * children, 7–9 µs without; docs/perf-log/2026-11.md, "one logger per request"). A logger shared with
 * other requests (the app's own, or the silent one of an app without logs) is never changed: the
 * request gets a child instead.
 */
export function addRequestLogFields(
  request: { log: FastifyBaseLogger; readonly server: { readonly log: FastifyBaseLogger } },
  reply: { log: FastifyBaseLogger },
  fields: Record<string, unknown>,
): void {
  const log: FastifyBaseLogger & { setBindings?: (fields: Record<string, unknown>) => void } = request.log;
  if (log !== request.server.log && typeof log.setBindings === 'function') log.setBindings(fields);
  else request.log = log.child(fields);
  reply.log = request.log;
}
