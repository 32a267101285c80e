import type { FastifyInstance, HTTPMethods, LightMyRequestResponse } from 'fastify';
import { randomBytes } from 'node:crypto';
import { createBroker, type Broker } from '../../src/adapters/broker.js';
import { createSharedState, type SharedState } from '../../src/adapters/shared-state.js';
import type { Database } from '../../src/adapters/database.js';
import { createPspxClient, type PspxClientOptions } from '../../src/adapters/pspx/pspx-client.js';
import { createSimulatorServer, type SimulatorServer } from '../../src/adapters/pspx/pspx-simulator.js';
import { buildApp } from '../../src/app.js';
import type { ReloadSecrets } from '../../src/http/routes/admin/system.js';
import { type Config, DEMO_CONFIG_FILE, loadConfig, readConfigFile, secretsOf } from '../../src/config.js';
import { applyConfig } from '../../src/domain/bootstrap/apply-config.js';
import type { ConfigFile } from '../../src/domain/bootstrap/config-file.js';
import { messageSignedHeaders } from '../../src/domain/auth/message-signing.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { createFeeEngine } from '../../src/domain/rules/fees/index.js';
import { openTestDatabase } from './database.js';
import { recordErrorAnswers } from './error-contract.js';

export const demoConfigFile = (): ConfigFile => readConfigFile(DEMO_CONFIG_FILE);

export interface TestApp {
  readonly app: FastifyInstance;
  readonly db: Database;
  readonly ledger: Ledger;
  readonly broker: Broker;
  /** Replay caches and rate limits: Redis under a prefix of this app's own when REDIS_URL is set. */
  readonly shared: SharedState;
  readonly config: Config;
  /** The provider behind `app`: knobs, counters and its address (one per test app). */
  readonly pspxSimulator: SimulatorServer;
  /** Mutable, as CONFIG_FILE reloads are. */
  secrets: Map<string, readonly string[]>;
  /** A signed request through fastify.inject. */
  call(method: string, path: string, options?: CallOptions): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export interface CallOptions {
  readonly service?: string;
  readonly user?: number | string;
  readonly body?: unknown;
  /** Sent as is, instead of JSON.stringify(body). */
  readonly rawBody?: string;
  readonly headers?: Record<string, string>;
  readonly nowS?: number;
  /** The older X-Signature (docs/rules.md R1) by default; 'message' signs with an HTTP Message Signature (docs/SECURITY.md §2). */
  readonly scheme?: 'x-signature' | 'message';
}

/** One app and one database per test file, on PGlite or (DATABASE_URL) a private PostgreSQL schema. */
export async function startTestApp(
  options: {
    file?: ConfigFile;
    env?: Record<string, string>;
    broker?: Broker;
    pspx?: Omit<PspxClientOptions, 'baseUrl'>;
    /** Behind POST /admin/config/reload; tests usually swap `secrets` in it. Absent: that route answers 503. */
    reloadSecrets?: ReloadSecrets;
    /** Receives the app's JSON log lines (level info and up). */
    logStream?: { write(line: string): void };
    /** Wraps the SQL ledger, for tests that inject ledger faults. */
    wrapLedger?: (ledger: Ledger) => Ledger;
    /** Replay caches made by the test (a second instance on the first one's Redis prefix); the test closes them. */
    shared?: SharedState;
    /** A migrated database the test opened (one reached through a TCP proxy); closed with the app. */
    db?: Database;
  } = {},
): Promise<TestApp> {
  const db = options.db ?? (await openTestDatabase());
  const ledger = options.wrapLedger?.(new SqlLedger()) ?? new SqlLedger();
  const file = options.file ?? demoConfigFile();
  const config: Config = {
    // Tests of other behaviours send hundreds of refused signatures from one address: the
    // failing-source slow-down is tested where it is set low (throttle.test.ts).
    ...loadConfig({ QR_SIGNING_SECRET: 'test-qr-secret', ADMIN_TOKEN: 'test-admin-token', AUTH_FAILURE_BURST: '1000000', ...options.env }),
    file,
  };
  await applyConfig(db, ledger, file);
  // With REDIS_URL set (the CI's second pass) live messages go through Redis, as in production.
  const broker = options.broker ?? createBroker(process.env.REDIS_URL);
  const shared = options.shared ?? createSharedState(process.env.REDIS_URL, `payorch-test-${randomBytes(6).toString('hex')}:`);
  const holder: { secrets: Map<string, readonly string[]> } = { secrets: secretsOf(file) };
  const pspxSimulator = await createSimulatorServer();
  const pspx = createPspxClient({ ...options.pspx, baseUrl: pspxSimulator.url });
  const fees = await createFeeEngine();
  const app = await buildApp({
    config,
    db,
    ledger,
    broker,
    shared,
    pspx,
    fees,
    secrets: () => holder.secrets,
    ...(options.logStream === undefined ? {} : { logger: { level: 'info', stream: options.logStream } }),
    ...(options.reloadSecrets === undefined ? {} : { reloadSecrets: options.reloadSecrets }),
  });
  const errorAnswers = recordErrorAnswers(app);
  await app.ready();
  const testApp: TestApp = {
    app,
    db,
    ledger,
    broker,
    shared,
    config,
    pspxSimulator,
    get secrets() {
      return holder.secrets;
    },
    set secrets(value) {
      holder.secrets = value;
    },
    call(method, path, callOptions = {}) {
      const service = callOptions.service ?? 'wallet-api';
      const secret = holder.secrets.get(service)?.[0] ?? 'no-secret';
      const raw = callOptions.rawBody ?? (callOptions.body === undefined ? '' : JSON.stringify(callOptions.body));
      const sign = callOptions.scheme === 'message' ? messageSignedHeaders : signedHeaders;
      const headers: Record<string, string> = {
        ...sign(service, secret, method, path, raw, {
          ...(callOptions.user === undefined ? {} : { userId: callOptions.user }),
          ...(callOptions.nowS === undefined ? {} : { nowS: callOptions.nowS }),
        }),
        ...(raw === '' ? {} : { 'content-type': 'application/json' }),
        ...callOptions.headers,
      };
      return app.inject({ method: method as HTTPMethods, url: path, headers, ...(raw === '' ? {} : { payload: raw }) });
    },
    async close() {
      // Read before closing: each error this file's tests met must be listed in the document.
      const undocumented = errorAnswers.undocumented();
      await app.close();
      await fees.dispose();
      await pspxSimulator.close();
      await broker.close();
      if (options.shared === undefined) await shared.close();
      await db.close();
      if (undocumented.length > 0) {
        throw new Error(`errors answered but not listed in the OpenAPI document (method route status code):\n${undocumented.join('\n')}`);
      }
    },
  };
  return testApp;
}

/**
 * The health answer once the probe has had a calm second: a loaded CI machine can starve a test
 * process for over a second, which the probe rightly reports as pressure.
 */
export async function healthWhenCalm(app: FastifyInstance, waitMsMax = 10_000): Promise<LightMyRequestResponse> {
  const deadline = Date.now() + waitMsMax;
  for (;;) {
    const res = await app.inject({ method: 'GET', url: '/health' });
    const underPressure = res.statusCode === 503 && (res.json() as { message?: string }).message === 'Service under pressure';
    if (!underPressure || Date.now() > deadline) return res;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
