import { type Attributes, context, createContextKey, type Span, SpanStatusCode, trace } from '@opentelemetry/api';
import { VERSION } from '../version.js';

/**
 * Spans of payorch's own work (ledger calls, PGlite statements, worker steps) through the
 * OpenTelemetry API only. Without an SDK (OTEL_EXPORTER_OTLP_ENDPOINT unset, see telemetry.ts)
 * the API's tracer is a no-op and its context never carries anything, so these wrappers cost a
 * function call; with one, they join whatever span is active (the request's, or a worker run's).
 */
const tracer = trace.getTracer('payorch', VERSION);

/** The attribute every span about one or more intents carries: a trace is found by intent id. */
export const INTENT_ID_ATTRIBUTE = 'payorch.intent_id';

const INTENT_IDS = createContextKey('payorch.intent_ids');

/** Runs `work` in a span named `name`; the span records a thrown error and ends when `work` settles. */
export function inSpan<T>(name: string, attributes: Attributes, work: (span: Span) => Promise<T>): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * Runs `work` with the intents it is about in the active context: a ledger call deep below (group
 * commit batches several intents into one call) then tags its span with them, without the domain
 * passing ids through every signature. The active span is left alone: in a group commit it is the
 * request span of one intent of the batch only.
 */
export function withIntentIds<T>(intentIds: readonly string[], work: () => Promise<T>): Promise<T> {
  return context.with(context.active().setValue(INTENT_IDS, intentIds), work);
}

/** The intent-id attribute for a span opened under `withIntentIds`, or none. */
export function intentAttributes(): Attributes {
  const ids = context.active().getValue(INTENT_IDS) as readonly string[] | undefined;
  if (ids === undefined) return {};
  return { [INTENT_ID_ATTRIBUTE]: ids.length === 1 ? ids[0]! : [...ids] };
}

/**
 * The active span's ids for a log line (pino `mixin`): a log search jumps to the trace and back.
 * Empty without tracing, so log lines stay as they were.
 */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (span === undefined) return {};
  const { traceId, spanId, traceFlags } = span.spanContext();
  // A span the sampler dropped is exported nowhere: an id for it would point at nothing.
  if ((traceFlags & 1) === 0) return {};
  return { trace_id: traceId, span_id: spanId };
}

let flush: () => Promise<void> = async () => {};

/** Set by the SDK bootstrap: what `flushTraces` runs. */
export function onFlushTraces(flushSpans: () => Promise<void>): void {
  flush = flushSpans;
}

/** Exports the spans still buffered, before the process exits; nothing without tracing. */
export function flushTraces(): Promise<void> {
  return flush();
}

/** Names the intent a request or worker step is about on its span. */
export function tagIntent(intentId: string): void {
  trace.getActiveSpan()?.setAttribute(INTENT_ID_ATTRIBUTE, intentId);
}
