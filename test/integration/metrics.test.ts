import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBroker } from '../../src/adapters/broker.js';
import { createMetrics, timedLedger } from '../../src/observability/metrics.js';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { VERSION } from '../../src/version.js';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createFeeEngine, type FeeEngine } from '../../src/domain/rules/fees/index.js';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startExpirySweep } from '../../src/workers/expiry-sweep.js';
import { createOutboxWorker, OUTBOX_DEFAULTS } from '../../src/workers/outbox-worker.js';
import { createPspWorker } from '../../src/workers/psp-worker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createMerchant, createUser, intentBody, topUp } from '../support/payments.js';
import { captureLogger, drain, payout, registerIpps, testPspSettings } from '../support/workers.js';

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** The Prometheus text format, enough of it for these assertions (no escaped quotes in our labels). */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match?.[1] === undefined || match[3] === undefined) throw new Error(`not a sample line: ${line}`);
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one series of `name` whose labels include `labels`; undefined when absent. */
function seriesValue(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} series`);
  return found[0]?.value;
}

const MERCHANT = 7;
let t: TestApp;

async function scrape(): Promise<Sample[]> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return parse(res.body);
}

beforeAll(async () => {
  t = await startTestApp();
  await createUser(t, 1);
  await createUser(t, 2);
  await createMerchant(t, MERCHANT);
  await topUp(t, 1, 10_000);
  // The known workload: three settled P2P payments and one refused for funds (user 2 has nothing).
  for (let i = 0; i < 3; i += 1) {
    const res = await t.call('POST', '/intents', {
      user: 1,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2 }),
    });
    expect(res.statusCode, res.body).toBe(201);
  }
  const refused = await t.call('POST', '/intents', {
    user: 2,
    body: intentBody({ operationType: 'P2P_TRANSFER', amount: 1_000_000, recipientUserId: 1 }),
  });
  expect(refused.json().error).toBe('INSUFFICIENT_FUNDS');
  // And one invoice, issued then canceled.
  const invoice = await t.call('POST', '/intents', {
    user: MERCHANT,
    body: intentBody({ operationType: 'INVOICE_PAYMENT', amount: 500, toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`) }),
  });
  expect(invoice.statusCode, invoice.body).toBe(201);
  const canceled = await t.call('POST', `/intents/${invoice.json().intentId}/cancel`, { user: MERCHANT });
  expect(canceled.statusCode, canceled.body).toBe(200);
});
afterAll(async () => t?.close());

describe('GET /metrics', () => {
  it('counts intents created, finished and refused by operation type, channel and outcome', async () => {
    // Unsigned, with a made-up operation type: counted, but never as a label value of its own.
    await t.app.inject({ method: 'POST', url: '/intents', payload: { operationType: 'MADE_UP_1' } });
    await t.app.inject({ method: 'POST', url: '/intents', payload: { operationType: 'MADE_UP_2' } });
    const samples = await scrape();
    expect(seriesValue(samples, 'payorch_intents_refused_total', { operation_type: 'unknown', error: 'UNAUTHORIZED' })).toBe(2);
    expect(samples.some((s) => s.labels.operation_type?.startsWith('MADE_UP'))).toBe(false);
    const p2p = { operation_type: 'P2P_TRANSFER', channel: 'INTERNAL_P2P' };
    expect(seriesValue(samples, 'payorch_intents_created_total', p2p)).toBe(3);
    expect(seriesValue(samples, 'payorch_intents_finished_total', { ...p2p, status: 'SETTLED' })).toBe(3);
    expect(seriesValue(samples, 'payorch_intents_finished_total', { ...p2p, status: 'FAILED' })).toBeUndefined();
    expect(seriesValue(samples, 'payorch_intents_refused_total', { operation_type: 'P2P_TRANSFER', error: 'INSUFFICIENT_FUNDS' })).toBe(1);
    expect(seriesValue(samples, 'payorch_intents_created_total', { operation_type: 'QP_TOPUP' })).toBe(1);
    const invoice = { operation_type: 'INVOICE_PAYMENT', channel: 'MERCHANT_INVOICE' };
    expect(seriesValue(samples, 'payorch_intents_created_total', invoice)).toBe(1);
    expect(seriesValue(samples, 'payorch_intents_finished_total', { ...invoice, status: 'CANCELED' })).toBe(1);
  });

  it('has request latency histograms per route pattern and status, not per raw URL', async () => {
    await t.call('GET', '/intents/00000000-0000-4000-8000-000000000000');
    // Unsigned and unknown: 401 before any routing detail leaks; one series for every such URL.
    await t.app.inject({ method: 'GET', url: '/no/such/path' });
    await t.app.inject({ method: 'GET', url: '/another/unknown/path' });
    const samples = await scrape();
    const count = (labels: Record<string, string>) => seriesValue(samples, 'payorch_http_request_duration_seconds_count', labels);
    expect(count({ method: 'POST', route: '/intents', status_code: '201' })).toBe(5);
    expect(count({ method: 'POST', route: '/intents', status_code: '422' })).toBe(1);
    expect(count({ method: 'POST', route: '/intents/:id/cancel', status_code: '200' })).toBe(1);
    expect(count({ method: 'GET', route: '/intents/:id', status_code: '404' })).toBe(1);
    expect(count({ method: 'GET', route: 'unmatched', status_code: '401' })).toBe(2);
    expect(samples.some((s) => s.name === 'payorch_http_request_duration_seconds_bucket' && s.labels.route?.includes('00000000'))).toBe(
      false,
    );
    const infBucket = seriesValue(samples, 'payorch_http_request_duration_seconds_bucket', {
      method: 'POST',
      route: '/intents',
      status_code: '201',
      le: '+Inf',
    });
    expect(infBucket).toBe(5);
  });

  it('times ledger batches, and reports the event-loop lag and the process', async () => {
    const samples = await scrape();
    // Every settled intent is at least one createTransfers batch.
    expect(seriesValue(samples, 'payorch_ledger_create_transfers_duration_seconds_count', { result: 'ok' })).toBeGreaterThanOrEqual(4);
    expect(seriesValue(samples, 'payorch_ledger_create_transfers_duration_seconds_sum', { result: 'ok' })).toBeGreaterThan(0);
    expect(seriesValue(samples, 'nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(seriesValue(samples, 'nodejs_eventloop_lag_p99_seconds')).toBeGreaterThanOrEqual(0);
    expect(seriesValue(samples, 'process_cpu_seconds_total')).toBeGreaterThan(0);
  });

  it('reads the outbox depth and the age of its oldest open job at scrape time', async () => {
    expect(seriesValue(await scrape(), 'payorch_outbox_depth')).toBe(0);
    expect(seriesValue(await scrape(), 'payorch_outbox_oldest_job_age_seconds')).toBe(0);
    const { rows } = await t.db.query<{ id: string }>(
      `SELECT id FROM intents WHERE operation_type = 'P2P_TRANSFER' ORDER BY created_at LIMIT 2`,
    );
    // Jobs that no worker picks up in this test: one two minutes old, one new.
    for (const [index, row] of rows.entries()) {
      await t.db.query(`INSERT INTO outbox (kind, intent_id, created_at) VALUES ('post_pending', $1, now() - make_interval(secs => $2))`, [
        row.id,
        index === 0 ? 120 : 0,
      ]);
    }
    try {
      const samples = await scrape();
      expect(seriesValue(samples, 'payorch_outbox_depth')).toBe(2);
      expect(seriesValue(samples, 'payorch_outbox_oldest_job_age_seconds')).toBeGreaterThanOrEqual(120);
      expect(seriesValue(samples, 'payorch_outbox_oldest_job_age_seconds')).toBeLessThan(180);
    } finally {
      await t.db.query(`UPDATE outbox SET done_at = now() WHERE done_at IS NULL`);
    }
    expect(seriesValue(await scrape(), 'payorch_outbox_depth')).toBe(0);
  });

  it('names the running build, and shows the PostgreSQL pool (absent on PGlite, which has no pool)', async () => {
    const samples = await scrape();
    expect(seriesValue(samples, 'payorch_build_info', { version: VERSION, nodejs_version: process.versions.node })).toBe(1);
    const connections = seriesValue(samples, 'payorch_db_pool_connections');
    if (t.db.kind === 'postgres') {
      expect(connections).toBeGreaterThanOrEqual(1);
      expect(seriesValue(samples, 'payorch_db_pool_connections_idle')).toBeLessThanOrEqual(connections ?? 0);
      expect(seriesValue(samples, 'payorch_db_pool_waiting')).toBe(0);
    } else {
      expect(connections).toBeUndefined();
    }
  });

  it('needs no signature when METRICS_TOKEN is unset', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
  });
});

describe('GET /metrics with METRICS_TOKEN', () => {
  let guarded: { app: FastifyInstance };
  let fees: FeeEngine;
  beforeAll(async () => {
    // A second instance on the same database, configured as METRICS_TOKEN=scrape-secret would.
    fees = await createFeeEngine();
    const config = { ...loadConfig({ METRICS_TOKEN: 'scrape-secret', ADMIN_TOKEN: 'test-admin-token' }), file: t.config.file };
    const app = await buildApp({
      config,
      db: t.db,
      ledger: t.ledger,
      broker: createMemoryBroker(),
      pspx: createPspxClient({ baseUrl: t.pspxSimulator.url }),
      fees,
      secrets: () => t.secrets,
    });
    guarded = { app };
  });
  afterAll(async () => {
    await guarded?.app.close();
    await fees?.dispose();
  });

  it('answers 401 without the bearer token or with a wrong one, 200 with it', async () => {
    const get = (authorization?: string) =>
      guarded.app.inject({ method: 'GET', url: '/metrics', ...(authorization === undefined ? {} : { headers: { authorization } }) });
    const missing = await get();
    expect(missing.statusCode).toBe(401);
    expect(missing.json().error).toBe('UNAUTHORIZED');
    expect((await get('Bearer wrong')).statusCode).toBe(401);
    // The admin token is a different secret and does not open the metrics.
    expect((await get('Bearer test-admin-token')).statusCode).toBe(401);
    const ok = await get('Bearer scrape-secret');
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toContain('payorch_http_request_duration_seconds');
  });

  it('keeps one registry per app: the other app counted nothing of this one', async () => {
    const res = await guarded.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer scrape-secret' } });
    expect(seriesValue(parse(res.body), 'payorch_intents_created_total', { operation_type: 'P2P_TRANSFER' })).toBeUndefined();
  });
});

describe('worker metrics', () => {
  it('counts PSP inquiries and escalations, the payouts the outbox finished, and invoice expiries', async () => {
    // The registry main.ts shares between the app and the workers of one process.
    const metrics = createMetrics({ sql: t.db });
    const log = captureLogger();
    const publisher = new StatusPublisher(t.broker, log);
    // Short time-outs: the held confirm of a 9998 receiver becomes a client-side time-out quickly.
    const client = createPspxClient({
      baseUrl: t.pspxSimulator.url,
      timeoutMs: 200,
      backoffBaseMs: 1,
      backoffCapMs: 5,
      observeAttempt: metrics.observePspxAttempt,
    });
    metrics.watchPspxBreaker(client.breaker);
    const psp = createPspWorker({ db: t.db, pspx: client, log, settings: testPspSettings, metrics });
    const outbox = createOutboxWorker({
      db: t.db,
      ledger: timedLedger(t.ledger, metrics),
      publisher,
      log,
      settings: { ...OUTBOX_DEFAULTS, backoffBaseMs: 1 },
      metrics,
    });
    await createUser(t, 601);
    await registerIpps(t, 601);
    await topUp(t, 601, 1_000_000);
    await payout(t, 601, '0812341234', 5_000); // settles
    await payout(t, 601, '0812349999', 5_000); // inquiry rejected: FAILED
    await payout(t, 601, '0812349998', 5_000); // every status inquiry pending: MANUAL_REVIEW
    try {
      await drain(psp, outbox);
    } finally {
      await outbox.stop();
    }

    const invoice = await t.call('POST', '/intents', {
      user: MERCHANT,
      body: intentBody({ operationType: 'INVOICE_PAYMENT', amount: 500, toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`) }),
    });
    await t.db.query(`UPDATE intents SET expires_at = now() - interval '1 second' WHERE id = $1`, [invoice.json().intentId]);
    const sweep = startExpirySweep({ db: t.db, publisher, log, intervalMs: 3_600_000, metrics });
    try {
      expect(await sweep.runOnce()).toBe(1);
    } finally {
      await sweep.stop();
    }

    const samples = parse(await metrics.render());
    const payouts = { operation_type: 'PSPX_WITHDRAWAL', channel: 'PSPX_TRANSFER' };
    expect(seriesValue(samples, 'payorch_intents_finished_total', { ...payouts, status: 'SETTLED' })).toBe(1);
    expect(seriesValue(samples, 'payorch_intents_finished_total', { ...payouts, status: 'FAILED' })).toBe(1);
    expect(seriesValue(samples, 'payorch_psp_escalations_total')).toBe(1);
    expect(seriesValue(samples, 'payorch_intents_manual_review')).toBe(1);
    expect(seriesValue(samples, 'payorch_psp_inquiries_total')).toBe(testPspSettings.inquiriesMax);
    expect(seriesValue(samples, 'payorch_psp_in_flight')).toBe(0);
    expect(seriesValue(samples, 'payorch_ledger_create_transfers_duration_seconds_count', { result: 'ok' })).toBe(2);
    expect(seriesValue(samples, 'payorch_invoice_expiries_total')).toBe(1);
    // Three inquiries answered; the 9998 receiver's confirm is held past the client's time-out.
    const attempts = (operation: string, outcome: string) =>
      seriesValue(samples, 'payorch_pspx_request_duration_seconds_count', { operation, outcome });
    expect(attempts('inquiry', 'answer')).toBe(3);
    expect(attempts('confirm', 'timeout')).toBe(1);
    expect(attempts('status', 'answer')).toBeGreaterThanOrEqual(testPspSettings.inquiriesMax);
    expect(seriesValue(samples, 'payorch_pspx_circuit_breaker_state')).toBe(0);
    expect(seriesValue(samples, 'payorch_intents_finished_total', { operation_type: 'INVOICE_PAYMENT', status: 'EXPIRED' })).toBe(1);
  });
});

describe('PSPX breaker metrics', () => {
  it('shows the breaker open, and the attempts that opened it, when the provider cannot be reached', async () => {
    const metrics = createMetrics();
    // Nothing listens on port 1 of loopback: every attempt is refused at once.
    const client = createPspxClient({
      baseUrl: 'http://127.0.0.1:1',
      attemptsMax: 1,
      breakerFailuresMax: 2,
      observeAttempt: metrics.observePspxAttempt,
    });
    metrics.watchPspxBreaker(client.breaker);
    const breakerState = async () => seriesValue(parse(await metrics.render()), 'payorch_pspx_circuit_breaker_state');
    expect(await breakerState()).toBe(0);
    for (let call = 0; call < 3; call += 1) expect((await client.partnerBalance()).kind).toBe('unknown');
    const samples = parse(await metrics.render());
    expect(seriesValue(samples, 'payorch_pspx_circuit_breaker_state')).toBe(2);
    // The third call was held back by the open breaker: never sent, so never timed.
    expect(seriesValue(samples, 'payorch_pspx_request_duration_seconds_count', { operation: 'balance', outcome: 'network' })).toBe(2);
  });
});
