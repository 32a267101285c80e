#!/usr/bin/env node
// Tracing starts before the CLI module graph loads pg, ioredis and Fastify, which its
// instrumentations patch as they load; without an endpoint the SDK is never imported.
if (process.argv[2] === 'serve' && process.env.OTEL_EXPORTER_OTLP_ENDPOINT) {
  const { startTelemetry } = await import('../dist/telemetry.js');
  startTelemetry();
}
const { runCli } = await import('../dist/cli/main.js');

runCli(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  },
);
