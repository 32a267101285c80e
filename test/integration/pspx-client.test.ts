import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPspxClient, type PspxClientOptions, type Receiver } from '../../src/adapters/pspx/pspx-client.js';
import { bangkokSettlementDate, createSimulatorServer, type SimulatorServer } from '../../src/adapters/pspx/pspx-simulator.js';

const INITIAL_BALANCE = 100_000_000n;
/** Short enough to keep the suite fast, long enough for a loaded CI machine to answer a normal call. */
const CLIENT_TIMEOUT_MS = 200;

let server: SimulatorServer;
beforeAll(async () => {
  server = await createSimulatorServer({ initialBalance: INITIAL_BALANCE });
});
afterAll(async () => server?.close());

const client = (options: Omit<PspxClientOptions, 'baseUrl'> = {}) =>
  createPspxClient({ baseUrl: server.url, timeoutMs: CLIENT_TIMEOUT_MS, backoffBaseMs: 10, ...options });
const receiver = (receiverAccount: string): Receiver => ({ receiverType: 'MSISDN', receiverAccount });
const balance = async () => {
  const result = await client().partnerBalance();
  if (result.kind !== 'ok') throw new Error(`balance unknown: ${result.detail}`);
  return result.balance;
};
const inquired = async (account: string, amount: bigint) => {
  const intentId = randomUUID();
  const inquiry = await client().inquiry(intentId, amount, receiver(account));
  if (inquiry.kind !== 'ok') throw new Error(`inquiry not ok: ${JSON.stringify(inquiry)}`);
  return { intentId, inquiryRef: inquiry.inquiryRef };
};

describe('PSPX outcomes by receiver account (docs/rules.md, Simulator outcomes)', () => {
  it('any other account: inquiry and confirm succeed, settlementDate is today in Bangkok, the partner balance drops once', async () => {
    const before = await balance();
    const { intentId, inquiryRef } = await inquired('0812345678', 12_345n);
    const confirmed = await client().confirm(intentId, inquiryRef);
    expect(confirmed).toEqual({ kind: 'completed', settlementDate: bangkokSettlementDate() });
    expect(confirmed.kind === 'completed' && /^20[0-9]{6}$/.test(confirmed.settlementDate)).toBe(true);
    expect(await client().statusInquiry(intentId)).toEqual(confirmed);
    expect(await balance()).toBe(before - 12_345n);
    expect(server.simulator.confirmsReceived(intentId)).toBe(1);
  });

  it('9999: the inquiry rejects the receiver, and the provider reports the payout failed', async () => {
    const intentId = randomUUID();
    expect(await client().inquiry(intentId, 500n, receiver('0800009999'))).toEqual({ kind: 'rejected', reason: 'receiver_rejected' });
    expect(await client().statusInquiry(intentId)).toEqual({ kind: 'failed', reason: 'receiver_rejected' });
  });

  it('9998: confirm times out on the client (sent once), every status inquiry answers pending, nothing is paid', async () => {
    const before = await balance();
    const { intentId, inquiryRef } = await inquired('0800009998', 700n);
    const startedMs = Date.now();
    const confirmed = await client().confirm(intentId, inquiryRef);
    expect(confirmed).toMatchObject({ kind: 'unknown', cause: 'timeout' });
    expect(Date.now() - startedMs).toBeLessThan(server.simulator.confirmHoldMs);
    expect(server.simulator.confirmsReceived(intentId)).toBe(1);
    for (let i = 0; i < 5; i += 1) expect(await client().statusInquiry(intentId)).toEqual({ kind: 'pending' });
    expect(server.simulator.payoutsMade(intentId)).toBe(0);
    expect(await balance()).toBe(before);
  });

  it('9997: confirm times out, the first status inquiry answers completed, later ones the same', async () => {
    const before = await balance();
    const { intentId, inquiryRef } = await inquired('0800009997', 900n);
    expect(await client().confirm(intentId, inquiryRef)).toMatchObject({ kind: 'unknown', cause: 'timeout' });
    const first = await client().statusInquiry(intentId);
    expect(first).toEqual({ kind: 'completed', settlementDate: bangkokSettlementDate() });
    expect(await client().statusInquiry(intentId)).toEqual(first);
    expect(await balance()).toBe(before - 900n);
    expect(server.simulator.payoutsMade(intentId)).toBe(1);
  });
});

describe('idempotency on the intent id', () => {
  it('a second confirm answers the same outcome and does not pay twice: 2 received, 1 paid', async () => {
    const before = await balance();
    const { intentId, inquiryRef } = await inquired('0811111111', 4_000n);
    const first = await client().confirm(intentId, inquiryRef);
    const second = await client().confirm(intentId, inquiryRef);
    expect(first.kind).toBe('completed');
    expect(second).toEqual(first);
    expect(server.simulator.confirmsReceived(intentId)).toBe(2);
    expect(server.simulator.payoutsMade(intentId)).toBe(1);
    expect(await balance()).toBe(before - 4_000n);
  });

  it('a repeated inquiry gets the same reference; one with other parameters is refused', async () => {
    const intentId = randomUUID();
    const first = await client().inquiry(intentId, 100n, receiver('0822222222'));
    expect(await client().inquiry(intentId, 100n, receiver('0822222222'))).toEqual(first);
    expect(await client().inquiry(intentId, 101n, receiver('0822222222'))).toEqual({
      kind: 'rejected',
      reason: 'intent_parameters_mismatch',
    });
  });

  it('a confirm with an unknown inquiry reference is rejected; an intent never confirmed is not found', async () => {
    const { intentId } = await inquired('0833333333', 100n);
    expect(await client().confirm(intentId, 'INQ-forged')).toEqual({ kind: 'rejected', reason: 'unknown_inquiry' });
    expect(await client().statusInquiry(intentId)).toEqual({ kind: 'not_found' });
    expect(await client().statusInquiry(randomUUID())).toEqual({ kind: 'not_found' });
  });

  it('a payout above the partner balance is rejected and leaves the balance alone', async () => {
    const poor = await createSimulatorServer({ initialBalance: 1_000n });
    try {
      const pspx = createPspxClient({ baseUrl: poor.url, timeoutMs: CLIENT_TIMEOUT_MS });
      const intentId = randomUUID();
      const inquiry = await pspx.inquiry(intentId, 5_000n, receiver('0844444444'));
      expect(inquiry.kind).toBe('ok');
      const confirmed = await pspx.confirm(intentId, inquiry.kind === 'ok' ? inquiry.inquiryRef : '');
      expect(confirmed).toEqual({ kind: 'rejected', reason: 'insufficient_partner_balance' });
      expect(await pspx.partnerBalance()).toEqual({ kind: 'ok', balance: 1_000n });
    } finally {
      await poor.close();
    }
  });

  it('wallet registration with one idempotency key names one wallet', async () => {
    const customer = {
      externalUserId: 'ext-1',
      customerEnglishName: 'Somchai Jaidee',
      senderTaxId: '1234567890123',
      senderAccountName: 'Somchai Jaidee',
      documentExpiry: '2030-01-01',
      dateOfBirth: '1990-05-17',
      phoneNumber: '0812345678',
      nationality: 'TH',
      address: '1 Sukhumvit Road, Bangkok',
    };
    const created = server.simulator.stats.walletsCreated;
    const first = await client().registerWallet('key-a', customer);
    expect(first).toMatchObject({ kind: 'registered' });
    expect(await client().registerWallet('key-a', customer)).toEqual(first);
    expect(server.simulator.stats.walletsCreated).toBe(created + 1);
    expect(await client().registerWallet('key-b', { ...customer, senderTaxId: '12' })).toEqual({
      kind: 'rejected',
      reason: 'senderTaxId must have 13 digits',
    });
  });
});

describe('retries, time-outs and the circuit breaker', () => {
  it('retries an idempotent read after 503 answers and then succeeds', async () => {
    const { requests } = server.simulator.stats;
    server.simulator.failNext(2);
    expect(await client({ attemptsMax: 3 }).partnerBalance()).toMatchObject({ kind: 'ok' });
    expect(server.simulator.stats.requests - requests).toBe(3);
  });

  it('gives up after attemptsMax and answers unknown http_5xx', async () => {
    server.simulator.failNext(2);
    expect(await client({ attemptsMax: 2 }).statusInquiry(randomUUID())).toMatchObject({ kind: 'unknown', cause: 'http_5xx' });
  });

  it('never resends a confirm: a 503 leaves the answer unknown after one request', async () => {
    const { intentId, inquiryRef } = await inquired('0855555555', 100n);
    const { requests } = server.simulator.stats;
    server.simulator.failNext(1);
    expect(await client({ attemptsMax: 5 }).confirm(intentId, inquiryRef)).toMatchObject({ kind: 'unknown', cause: 'http_5xx' });
    expect(server.simulator.stats.requests - requests).toBe(1);
    expect(await client().statusInquiry(intentId)).toEqual({ kind: 'not_found' });
  });

  it('times a slow provider out per attempt (setDelayMs)', async () => {
    server.simulator.setDelayMs(CLIENT_TIMEOUT_MS * 3);
    try {
      expect(await client({ attemptsMax: 2 }).partnerBalance()).toMatchObject({ kind: 'unknown', cause: 'timeout' });
    } finally {
      server.simulator.setDelayMs(0);
    }
  });

  it('answers unknown network when nothing listens', async () => {
    const gone = await createSimulatorServer();
    await gone.close();
    const pspx = createPspxClient({ baseUrl: gone.url, attemptsMax: 2, backoffBaseMs: 1 });
    expect(await pspx.partnerBalance()).toMatchObject({ kind: 'unknown', cause: 'network' });
  });

  it('opens after consecutive failures, sends nothing while open, half-opens after the cool-down and closes on success', async () => {
    const cooldownMs = 300;
    const pspx = client({ attemptsMax: 1, breakerFailuresMax: 3, breakerCooldownMs: cooldownMs });
    server.simulator.failNext(3);
    for (let i = 0; i < 3; i += 1) expect(await pspx.partnerBalance()).toMatchObject({ cause: 'http_5xx' });
    expect(pspx.breaker.state).toBe('open');

    const { requests } = server.simulator.stats;
    expect(await pspx.partnerBalance()).toMatchObject({ kind: 'unknown', cause: 'circuit_open' });
    expect(server.simulator.stats.requests).toBe(requests);

    await sleep(cooldownMs + 20);
    expect(pspx.breaker.state).toBe('half-open');
    server.simulator.failNext(1);
    expect(await pspx.partnerBalance()).toMatchObject({ cause: 'http_5xx' });
    expect(pspx.breaker.state).toBe('open');

    await sleep(cooldownMs + 20);
    expect(await pspx.partnerBalance()).toMatchObject({ kind: 'ok' });
    expect(pspx.breaker.state).toBe('closed');
  });

  it('a failure rate of 1 answers 503 to everything, 0 to nothing', async () => {
    server.simulator.setFailureRate(1);
    try {
      expect(await client({ attemptsMax: 1 }).partnerBalance()).toMatchObject({ cause: 'http_5xx' });
    } finally {
      server.simulator.setFailureRate(0);
    }
    expect(await client({ attemptsMax: 1 }).partnerBalance()).toMatchObject({ kind: 'ok' });
  });
});

describe('settlement date', () => {
  it('follows the Bangkok calendar (UTC+7), not UTC', () => {
    expect(bangkokSettlementDate(new Date('2024-02-29T16:59:59Z'))).toBe('20240229');
    expect(bangkokSettlementDate(new Date('2024-02-29T17:00:00Z'))).toBe('20240301');
  });
});
