import { FastifyOtelInstrumentation } from '@fastify/otel';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { onFlushTraces } from './adapters/tracing.js';

/**
 * OpenTelemetry's SDK, started by bin/payorch.js before anything imports pg, ioredis or Fastify
 * (an instrumentation patches a module as it loads) and only when OTEL_EXPORTER_OTLP_ENDPOINT is
 * set: without it this module is never imported and the API stays a no-op. The SDK reads the
 * standard OTEL_* variables itself (endpoint, OTEL_EXPORTER_OTLP_PROTOCOL, sampler, headers).
 */

/** Probes and scrapes would be most of the traces and say nothing about a payment. */
const UNTRACED_ROUTES = new Set(['/metrics', '/health', '/livez', '/readyz']);

/** `/intents/:id` as `/intents/{id}`, the OpenAPI spelling the span names use. */
function routeTemplate(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

export function startTelemetry(): void {
  const sdk = new NodeSDK({
    ...(process.env.OTEL_SERVICE_NAME === undefined ? { serviceName: 'payorch' } : {}),
    // Traces only: metrics stay on /metrics (Prometheus) and logs on standard output.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new FastifyOtelInstrumentation({
        registerOnInitialization: true,
        // No span per hook: a payment's trace is its request, statements, ledger call and PSPX
        // calls, and each span costs the hot path (docs/perf-log/2026-11.md, "Tracing"). The handler keeps its
        // span: wrapping it is what carries the request's context into the handler, past the body
        // parser's events.
        instrumentHooks: false,
        ignorePaths: (route: { url: string }) => UNTRACED_ROUTES.has(route.url),
        requestHook: (span, request) => {
          const route = request.routeOptions.url;
          span.updateName(route === undefined ? request.method : `${request.method} ${routeTemplate(route)}`);
        },
      }),
      new PgInstrumentation({ requireParentSpan: true, ignoreConnectSpans: true }),
      new IORedisInstrumentation({ requireParentSpan: true }),
      new UndiciInstrumentation({ requireParentforSpans: true }),
    ],
  });
  sdk.start();
  onFlushTraces(() => sdk.shutdown());
}
