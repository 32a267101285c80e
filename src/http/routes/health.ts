import type { App } from '../typed-app.js';
import type { Sql } from '../../adapters/database.js';
import type { Ledger } from '../../ledger/ledger.js';
import { MigrationChangedError, migrationStatus } from '../../adapters/migrations.js';
import { apiError } from '../../domain/errors.js';
import { responses } from '../schemas/shared.js';
import { Alive, HealthKo, HealthOk } from '../schemas/health.js';

export const EVENT_LOOP_DELAY_MAX_MS = 1000;
const tickIntervalMs = 100;
/** A stall stays visible for this long, so a probe that arrives just after it still sees it. */
const windowTicks = 10;

/**
 * Measures how late a 100 ms timer fires. The reading is the worst lateness of the last second,
 * or the time the loop has been blocked right now, whichever is larger.
 */
export function startEventLoopMonitor(): { delayMs: () => number; restart: () => void; stop: () => void } {
  const recent: number[] = [];
  let lastTick = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    recent.push(Math.max(0, now - lastTick - tickIntervalMs));
    if (recent.length > windowTicks) recent.shift();
    lastTick = now;
  }, tickIntervalMs);
  timer.unref();
  return {
    delayMs: () => Math.max(0, ...recent, performance.now() - lastTick - tickIntervalMs),
    /** Forgets what was measured so far: start-up work (migrations, compiling the WASM database) is not pressure. */
    restart: () => {
      recent.length = 0;
      lastTick = performance.now();
    },
    stop: () => clearInterval(timer),
  };
}

export function healthRoutes(app: App, deps: { sql: Sql; ledger: Ledger; version: string; eventLoopDelayMs: () => number }) {
  app.get(
    '/health',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['health'],
        operationId: 'getHealth',
        summary: 'Liveness and readiness: the ledger answers and the event loop keeps up (no signature)',
        security: [],
        response: { 200: HealthOk, 503: HealthKo },
      },
    },
    async (request, reply) => {
      // The ledger first: when it is down, that is the cause worth reporting.
      try {
        await deps.ledger.lookupAccounts(deps.sql, []);
      } catch (error) {
        request.log.error({ err: error }, 'ledger look-up failed');
        return reply.status(503).send({ status: 'ko', message: 'Ledger unavailable' });
      }
      if (deps.eventLoopDelayMs() > EVENT_LOOP_DELAY_MAX_MS) {
        return reply.status(503).send({ status: 'ko', message: 'Service under pressure' });
      }
      return { status: 'ok' as const, version: deps.version, timestamp: new Date().toISOString() };
    },
  );
}

/**
 * The orchestrator's two probes. Liveness never touches the database: a database outage must
 * take pods out of rotation (readiness), not have every one of them restarted.
 */
export function probeRoutes(app: App, deps: { sql: Sql }) {
  app.get(
    '/livez',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['health'],
        operationId: 'getLiveness',
        summary: 'Liveness: the process runs (no database call, no signature)',
        security: [],
        response: { 200: Alive },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['health'],
        operationId: 'getReadiness',
        summary: 'Readiness: the database answers and every migration is applied (no signature)',
        security: [],
        response: responses({ 200: Alive }, ['SERVICE_UNAVAILABLE']),
      },
    },
    async (request) => {
      let pending: readonly string[];
      try {
        ({ pendingMigrations: pending } = await migrationStatus(deps.sql));
      } catch (error) {
        if (error instanceof MigrationChangedError) throw apiError('SERVICE_UNAVAILABLE', error.message);
        request.log.warn({ err: error }, 'readiness: the database does not answer');
        throw apiError('SERVICE_UNAVAILABLE', 'database unavailable');
      }
      if (pending.length > 0) throw apiError('SERVICE_UNAVAILABLE', `migration ${pending[0]} is pending`);
      return { status: 'ok' as const };
    },
  );
}
