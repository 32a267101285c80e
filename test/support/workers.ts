import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import type { Logger } from '../../src/adapters/logger.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { createOutboxWorker, OUTBOX_DEFAULTS, type OutboxWorker } from '../../src/workers/outbox-worker.js';
import { createUser, topUp } from './payments.js';
import { createPspWorker, type PspWorker, type PspWorkerSettings } from '../../src/workers/psp-worker.js';
import type { TestApp } from './app.js';

/** Helpers for tests that drive PSPX payouts and the background workers by hand. */

export const customer = {
  externalUserId: 'ext-worker',
  customerEnglishName: 'Somchai Jaidee',
  senderTaxId: '1101700203451',
  senderAccountName: 'Somchai Jaidee',
  documentExpiry: '2031-12-31',
  dateOfBirth: '1988-02-29',
  phoneNumber: '0812345678',
  nationality: 'TH',
  address: '99 Sukhumvit Road, Khlong Toei, Bangkok 10110',
};

/** Fast settings: no pauses between inquiries or after unknown answers, so runOnce() loops are quick. */
export const testPspSettings: PspWorkerSettings = {
  batchSizeMax: 10,
  leaseMs: 10_000,
  concurrencyMax: 10,
  inquiriesMax: 5,
  inquiryDelayMs: 0,
  retryDelayMs: 0,
  ledgerPendingTimeoutS: 1800,
  confirmMarginS: 300,
  confirmNotReceivedAfterMs: 6_000,
};

/** The outbox worker of a test app, retrying failed jobs after 1 ms; on the app's ledger unless a test stands in another. */
export function testOutbox(t: TestApp, log: Logger, ledger: Ledger = t.ledger): OutboxWorker {
  return createOutboxWorker({
    db: t.db,
    ledger,
    publisher: new StatusPublisher(t.broker, log),
    log,
    settings: { ...OUTBOX_DEFAULTS, backoffBaseMs: 1 },
  });
}

/**
 * The PSP and outbox workers of a test app, to drive payouts by hand with drain(). The PSP worker
 * has a PSPX client of its own, so the app's circuit breaker stays the app's; `timeoutMs` short, so
 * the simulator's held confirm (receiver …9998) becomes a client-side time-out quickly.
 */
export function payoutWorkers(t: TestApp, log: Logger, timeoutMs: number): { psp: PspWorker; outbox: OutboxWorker } {
  const client = createPspxClient({ baseUrl: t.pspxSimulator.url, timeoutMs, backoffBaseMs: 1, backoffCapMs: 5 });
  return { psp: createPspWorker({ db: t.db, pspx: client, log, settings: testPspSettings }), outbox: testOutbox(t, log) };
}

/** A user with a PSPX wallet and `balance` satang: a payer of payouts. */
export async function payoutPayer(t: TestApp, userId: number, balance: number): Promise<void> {
  await createUser(t, userId);
  await registerIpps(t, userId);
  await topUp(t, userId, balance);
}

export async function registerIpps(t: TestApp, userId: number): Promise<void> {
  const res = await t.call('POST', '/accounts/register-ipps', { user: userId, body: { ...customer, externalUserId: `ext-${userId}` } });
  expect([200, 201], res.body).toContain(res.statusCode);
}

/** POST /intents for a payout to `receiverAccount`; the intent stays AUTHORIZED for the workers. */
export async function payout(
  t: TestApp,
  userId: number,
  receiverAccount: string,
  amount: number,
  options: { operationType?: 'PSPX_WITHDRAWAL' | 'THAI_QR_PAY'; live?: boolean } = {},
): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: userId,
    body: {
      idempotencyKey: randomUUID(),
      operationType: options.operationType ?? 'PSPX_WITHDRAWAL',
      amount,
      metadata: { ipps: { receiverType: 'MSISDN', receiverAccount } },
      ...(options.live === undefined ? {} : { live: options.live }),
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json()).toMatchObject({ status: 'AUTHORIZED', channel: 'PSPX_TRANSFER', requiresMonitoring: true });
  return res.json().intentId as string;
}

export type Trail = Array<[string | null, string]>;

export async function trailOf(t: TestApp, intentId: string): Promise<Trail> {
  return (await eventsOf(t, intentId)).map((e) => [e.statusFrom, e.statusTo]);
}

export interface EventView {
  statusFrom: string | null;
  statusTo: string;
  reason: string | null;
  payload: Record<string, unknown> | null;
}

export async function eventsOf(t: TestApp, intentId: string): Promise<EventView[]> {
  const res = await t.call('GET', `/intents/${intentId}/events`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().events as EventView[];
}

export async function intentOf(t: TestApp, intentId: string): Promise<{ status: string; failureReason: string | null }> {
  const res = await t.call('GET', `/intents/${intentId}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export const CREATED_TRAIL: Trail = [
  [null, 'CREATED'],
  ['CREATED', 'VALIDATED'],
  ['VALIDATED', 'AUTHORIZED'],
];

/** Runs the PSP worker and the outbox worker in turns until neither has anything left to do. */
// Generous: on a loaded machine the short test time-outs of the PSP client turn answers into
// 'unknown' now and then, and each such answer costs the intent another round.
export async function drain(psp: PspWorker, outbox: OutboxWorker, roundsMax = 150): Promise<number> {
  for (let round = 0; round < roundsMax; round += 1) {
    const claimed = await psp.runOnce();
    const run = await outbox.runOnce();
    if (claimed === 0 && run.jobsDone === 0 && run.jobsFailed === 0) return round;
  }
  throw new Error(`workers still busy after ${roundsMax} rounds`);
}

export interface LogLine {
  readonly level: 'info' | 'warn' | 'error';
  readonly bindings: Record<string, unknown>;
  readonly message: string | undefined;
}

/** A Logger that keeps every line (child bindings merged in), for assertions on log events. */
export function captureLogger(
  lines: LogLine[] = [],
  base: Record<string, unknown> = {},
): Logger & { readonly lines: LogLine[]; events(name: string): LogLine[] } {
  const write = (level: LogLine['level']) => (bindings: object, message?: string) => {
    lines.push({ level, bindings: { ...base, ...(bindings as Record<string, unknown>) }, message });
  };
  return {
    lines,
    info: write('info'),
    warn: write('warn'),
    error: write('error'),
    child: (bindings) => captureLogger(lines, { ...base, ...bindings }),
    events: (name) => lines.filter((line) => line.bindings.event === name),
  };
}
