import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPayorchClient, PayorchConnectionError, PayorchError, type PayorchClient, type PayorchClientOptions } from '@payorch/client';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';

/** User ids of this file only: the payer lock is database-wide on a shared PostgreSQL server. */
const [PAYER, RECEIVER, FRESH] = [7101, 7102, 7103] as const;
const MERCHANT = 7104;

let t: TestApp;
let baseUrl: string;

beforeAll(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  await wallet().accounts.create({ userId: FRESH });
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

/** A client on the live listener; retries wait 0 ms but are recorded. */
/** What a test may change of a signing client: its secret, transport and retries. */
type ClientTuning = Partial<Pick<PayorchClientOptions, 'fetch' | 'retry' | 'timeoutMs' | 'sleep'>> & {
  readonly secret?: string;
  readonly signatureScheme?: 'message' | 'x-signature';
};

function clientFor(serviceId: string, options: ClientTuning = {}): PayorchClient {
  return createPayorchClient({
    baseUrl,
    serviceId,
    secret: t.secrets.get(serviceId)?.[0] ?? 'no-secret',
    sleep: async () => {},
    ...options,
  });
}

const wallet = () => clientFor('wallet-api');

/** Calls through the real fetch, recorded; `answer` may replace the answer of call n (1-based). */
function recordingFetch(answer: (call: number, forward: () => Promise<Response>) => Promise<Response> = (_, forward) => forward()) {
  const calls: Array<{ url: string; body: string | undefined; headers: Record<string, string> }> = [];
  const stub: typeof fetch = async (input, init) => {
    const headers = Object.fromEntries(new Headers(init?.headers).entries());
    calls.push({ url: String(input), body: typeof init?.body === 'string' ? init.body : undefined, headers });
    return answer(calls.length, () => fetch(input, init));
  };
  return { stub, calls };
}

const unavailable = () =>
  new Response(JSON.stringify({ error: 'SERVICE_UNAVAILABLE', message: 'try later' }), {
    status: 503,
    headers: { 'content-type': 'application/json' },
  });

async function rejection(promise: Promise<unknown>): Promise<PayorchError> {
  const error = await promise.then(
    () => null,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(PayorchError);
  return error as PayorchError;
}

async function intentsWithKey(key: string): Promise<number> {
  const { rows } = await t.db.query<{ n: bigint | number }>('SELECT count(*) AS n FROM intents WHERE idempotency_key = $1', [key]);
  return Number(rows[0]?.n ?? 0);
}

describe('signed requests through the typed methods', () => {
  it('health needs no signature, and a 503 is an answer, not an error', async () => {
    const health = await clientFor('wallet-api', { secret: 'wrong' }).health();
    // A loaded machine (parallel test files) can trip the event-loop probe: both answers are typed.
    if (health.status === 'ok') expect(health.version).toEqual(expect.any(String));
    else expect(health.message).toMatch(/^(Service under pressure|Ledger unavailable)$/);
  });

  it('accounts, a top-up, a P2P payment, its reads and the balance, with money as strings', async () => {
    const client = wallet();
    expect(await client.accounts.create({ userId: PAYER })).toEqual({
      accountName: `user.${PAYER}.THB`,
      ledgerAccountId: expect.any(String),
    });
    await client.accounts.create({ userId: RECEIVER, currency: 'THB' });
    const topUp = await client.intents.create({ operationType: 'QP_TOPUP', amount: 50_000 }, { userId: PAYER });
    expect(topUp).toMatchObject({ status: 'SETTLED', channel: 'INTERNAL_P2P', preFeeAmount: '0', requiresMonitoring: false });

    const paid = await client.intents.create(
      { operationType: 'P2P_TRANSFER', amount: 1_500, recipientUserId: RECEIVER },
      { userId: PAYER },
    );
    expect(await client.intents.get(paid.intentId)).toMatchObject({
      status: 'SETTLED',
      amount: '1500',
      fromAccount: `user.${PAYER}.THB`,
      toAccount: `user.${RECEIVER}.THB`,
    });
    expect((await client.intents.events(paid.intentId)).events.map((event) => event.statusTo)).toEqual([
      'CREATED',
      'VALIDATED',
      'AUTHORIZED',
      'SETTLED',
    ]);
    expect(await client.accounts.balance(`user.${RECEIVER}.THB`)).toEqual({
      accountName: `user.${RECEIVER}.THB`,
      balance: '1500',
      currency: 'THB',
    });
    const history = await client.accounts.transactions(`user.${PAYER}.THB`, { limit: 1 });
    expect(history.transactions).toEqual([
      expect.objectContaining({ intentId: paid.intentId, direction: 'DEBIT', amount: '1500', balanceAfter: '48500' }),
    ]);

    // docs/rules.md R58: the balance at a time and statements, json and as a streamed file.
    const paidAt = new Date(Date.now() + 5);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await client.accounts.balanceAt(`user.${PAYER}.THB`, paidAt)).toEqual({
      accountName: `user.${PAYER}.THB`,
      balance: '48500',
      currency: 'THB',
      at: paidAt.toISOString(),
    });
    const range = { from: new Date(paidAt.getTime() - 600_000).toISOString(), to: paidAt.toISOString() };
    const statement = await client.accounts.statement(`user.${RECEIVER}.THB`, range);
    expect(statement).toMatchObject({ openingBalance: '0', closingBalance: '1500' });
    expect(statement.entries).toEqual([expect.objectContaining({ intentId: paid.intentId, direction: 'CREDIT', balanceAfter: '1500' })]);
    const file = await client.accounts.statement(`user.${RECEIVER}.THB`, { ...range, format: 'csv' });
    const lines = (await new Response(file).text()).trimEnd().split('\r\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain(`${paid.intentId},,P2P_TRANSFER,CREDIT,1500,0,1500`);
    const refused = await rejection(
      client.accounts.statement(`user.${RECEIVER}.THB`, { from: range.to, to: range.from, format: 'camt053' }),
    );
    expect(refused.status).toBe(422);
  });

  it('quote, policy evaluation and the fee dry-run', async () => {
    expect(await wallet().intents.quote({ operationType: 'WITHDRAWAL', amount: 5_000 })).toEqual({
      fee: '1000',
      totalCharge: '6000',
      breakdown: [{ account: 'system.revenue.THB', amount: '1000' }],
    });
    const decision = await wallet().policies.evaluate({
      userId: PAYER,
      amount: '100',
      currency: 'THB',
      channel: 'app',
      appId: 'wallet',
      operationType: 'P2P_TRANSFER',
    });
    expect(decision).toMatchObject({
      required: expect.any(String),
      reasonCode: expect.any(String),
      context: { dailyCumulative: expect.any(String), isNewPayee: false },
    });
    const dryRun = await clientFor('admin-tool').admin.feeRules.dryRun({
      expression: "[{account: 'system.revenue.THB', amount: amount / 10}]",
      context: { operationType: 'P2P_TRANSFER', amount: 1_000, currency: 'THB' },
    });
    expect(dryRun).toEqual({ splits: [{ account: 'system.revenue.THB', amount: '100' }], totalFee: '100' });
  });

  it('a merchant invoice: issue, confirm with If-Match, and a stale If-Match is 409 VERSION_MISMATCH', async () => {
    const merchant = await clientFor('admin-tool').accounts.create({ userId: MERCHANT, entityType: 'merchant' });
    if (!('primary' in merchant)) throw new Error('a merchant has a primary and a settlement account');
    const invoice = await wallet().intents.create(
      { operationType: 'INVOICE_PAYMENT', amount: 700, toLedgerAccountId: merchant.primary.ledgerAccountId },
      { userId: MERCHANT },
    );
    expect(invoice).toMatchObject({ status: 'CREATED', channel: 'MERCHANT_INVOICE', version: 0, qrSignature: expect.any(String) });
    const payer = await wallet().accounts.create({ userId: PAYER });
    if (!('ledgerAccountId' in payer)) throw new Error('a user has one account');
    const body = { payerLedgerAccountId: payer.ledgerAccountId, payerUserId: PAYER };

    const stale = await rejection(wallet().intents.confirm(invoice.intentId, body, { ifMatch: 5 }));
    expect([stale.status, stale.code, stale.body]).toEqual([409, 'VERSION_MISMATCH', { error: 'VERSION_MISMATCH', currentVersion: 0 }]);
    expect(await wallet().intents.confirm(invoice.intentId, body, { ifMatch: 0 })).toMatchObject({
      status: 'SETTLED',
      version: 1,
      replayed: false,
    });
  });

  it('cancel of an invoice by its issuer', async () => {
    const merchant = await clientFor('admin-tool').accounts.create({ userId: MERCHANT, entityType: 'merchant' });
    if (!('primary' in merchant)) throw new Error('a merchant has a primary and a settlement account');
    const invoice = await wallet().intents.create(
      { operationType: 'INVOICE_PAYMENT', amount: 300, toLedgerAccountId: merchant.primary.ledgerAccountId },
      { userId: MERCHANT },
    );
    expect(await wallet().intents.cancel(invoice.intentId, { reason: 'customer_left' }, { userId: MERCHANT })).toMatchObject({
      status: 'CANCELED',
    });
    const again = await rejection(wallet().intents.cancel(invoice.intentId, {}, { userId: MERCHANT }));
    expect([again.status, again.code]).toEqual([409, 'CANNOT_CANCEL']);
  });

  it('the live status stream yields the current status of a settled intent and ends', async () => {
    const client = wallet();
    const paid = await client.intents.create({ operationType: 'QP_TOPUP', amount: 100 }, { userId: PAYER });
    const seen: string[] = [];
    for await (const message of client.intents.stream(paid.intentId, { signal: AbortSignal.timeout(5_000) })) seen.push(message.status);
    expect(seen).toEqual(['SETTLED']);
  });

  it('admin: resolve, the admin intent reads, the audit and list/create of every admin table', async () => {
    const admin = clientFor('admin-tool').admin;
    const paid = await wallet().intents.create({ operationType: 'QP_TOPUP', amount: 100 }, { userId: PAYER });
    expect(await admin.resolve(paid.intentId, { resolution: 'CONFIRMED' })).toMatchObject({
      intentId: paid.intentId,
      previousStatus: 'SETTLED',
      status: 'SETTLED',
    });
    expect(await admin.intents.get(paid.intentId)).toMatchObject({
      intentId: paid.intentId,
      serviceId: 'wallet-api',
      events: expect.any(Array),
    });
    expect((await admin.intents.list({ limit: 1 })).intents).toHaveLength(1);
    expect(await admin.audit()).toMatchObject({ ok: true, violations: [] });

    const rule = await admin.feeRules.create({ name: 'client fee', operationType: 'P2P_TRANSFER', expression: '[]', active: false });
    expect(rule).toMatchObject({ id: expect.any(Number), timing: 'PRE', active: false });
    expect((await admin.feeRules.list()).feeRules.map((r) => r.id)).toContain(rule.id);
    expect(await admin.feeRules.update(rule.id, { priority: 7 })).toMatchObject({ priority: 7 });

    const route = await admin.routes.create({
      operationType: 'P2P_TRANSFER',
      channel: 'INTERNAL_P2P',
      minAmount: 1,
      maxAmount: 10,
      priority: 99,
      active: false,
    });
    expect(route).toMatchObject({ minAmount: '1', maxAmount: '10' });
    expect((await admin.routes.list({ active: false })).routes.map((r) => r.id)).toContain(route.id);

    const limit = await admin.limitRules.create({
      name: 'client cap',
      direction: 'DEBIT',
      window: 'DAILY',
      limitType: 'AMOUNT',
      limit: 10_000_000,
      active: false,
    });
    expect(limit).toMatchObject({ limit: '10000000', operationType: '*' });
    expect((await admin.limitRules.list()).limitRules.map((r) => r.id)).toContain(limit.id);

    const policy = await admin.authPolicies.create({
      scope: 'app:client-test',
      requiredStepUp: 'PIN',
      reasonCode: 'client_test',
      active: false,
    });
    expect((await admin.authPolicies.list()).authPolicies.map((p) => p.id)).toContain(policy.id);
    expect(await admin.authPolicies.deactivate(policy.id)).toMatchObject({ active: false });

    const key = await admin.serviceKeys.create({ serviceId: 'client-test', permissions: { allowedOperationTypes: [] }, active: false });
    expect(key).toMatchObject({ serviceId: 'client-test', active: false });
    expect((await admin.serviceKeys.list()).serviceKeys.map((k) => k.serviceId)).toContain('client-test');
    expect(await admin.serviceKeys.get('client-test')).toMatchObject({ serviceId: 'client-test' });
  });
});

describe('typed errors carry status, catalogue code and body', () => {
  it('401 UNAUTHORIZED with a wrong secret', async () => {
    const error = await rejection(clientFor('wallet-api', { secret: 'wrong' }).accounts.balance('system.revenue.THB'));
    expect([error.status, error.code]).toEqual([401, 'UNAUTHORIZED']);
    expect(error.body).toMatchObject({ error: 'UNAUTHORIZED', message: 'invalid signature' });
  });

  it('403 FORBIDDEN for an operation type outside the key', async () => {
    const error = await rejection(
      clientFor('mobile-gateway').intents.create({ operationType: 'QP_TOPUP', amount: 100 }, { userId: PAYER }),
    );
    expect([error.status, error.code]).toEqual([403, 'FORBIDDEN']);
  });

  it('404 NOT_FOUND for an unknown intent', async () => {
    const error = await rejection(wallet().intents.get(randomUUID()));
    expect([error.status, error.code]).toEqual([404, 'NOT_FOUND']);
  });

  it('409 CONFLICT for an idempotency key reused with another amount', async () => {
    const idempotencyKey = randomUUID();
    await wallet().intents.create({ idempotencyKey, operationType: 'QP_TOPUP', amount: 100 }, { userId: PAYER });
    const error = await rejection(wallet().intents.create({ idempotencyKey, operationType: 'QP_TOPUP', amount: 200 }, { userId: PAYER }));
    expect([error.status, error.code]).toEqual([409, 'CONFLICT']);
  });

  it('422 VALIDATION_ERROR for a fractional amount', async () => {
    const error = await rejection(wallet().intents.quote({ operationType: 'P2P_TRANSFER', amount: 1.5 }));
    expect([error.status, error.code]).toEqual([422, 'VALIDATION_ERROR']);
  });

  it('UNKNOWN for an answer without a catalogue code', async () => {
    const client = clientFor('wallet-api', {
      fetch: async () => new Response('<html>bad gateway</html>', { status: 502 }),
      retry: { attemptsMax: 1, baseDelayMs: 0 },
    });
    const error = await rejection(client.accounts.balance('system.revenue.THB'));
    expect([error.status, error.code, error.body]).toEqual([502, 'UNKNOWN', '<html>bad gateway</html>']);
  });
});

describe('retries: 5xx and network errors only, with the same idempotency key', () => {
  it('two 503s, then the request goes through: one intent, byte-identical bodies, growing waits', async () => {
    const { stub, calls } = recordingFetch((call, forward) => (call <= 2 ? Promise.resolve(unavailable()) : forward()));
    const waits: number[] = [];
    const client = clientFor('wallet-api', {
      fetch: stub,
      retry: { attemptsMax: 3, baseDelayMs: 100 },
      sleep: async (ms) => void waits.push(ms),
    });
    const created = await client.intents.create({ operationType: 'QP_TOPUP', amount: 100 }, { userId: FRESH });

    expect(created.status).toBe('SETTLED');
    expect(calls).toHaveLength(3);
    expect(new Set(calls.map((call) => call.body)).size).toBe(1);
    const key = (JSON.parse(calls[0]?.body ?? '{}') as { idempotencyKey?: string }).idempotencyKey ?? '';
    expect(key).toMatch(/^[0-9a-f-]{36}$/);
    expect(await intentsWithKey(key)).toBe(1);
    // Equal jitter: retry n waits between base·2^(n-1)/2 and base·2^(n-1).
    expect(waits).toHaveLength(2);
    expect(waits[0]).toBeGreaterThanOrEqual(50);
    expect(waits[0]).toBeLessThanOrEqual(100);
    expect(waits[1]).toBeGreaterThanOrEqual(100);
    expect(waits[1]).toBeLessThanOrEqual(200);
  });

  it('an answer lost after the service acted: the retry is a replay of the same intent, not a second payment', async () => {
    const first: { intentId?: string } = {};
    const { stub, calls } = recordingFetch(async (call, forward) => {
      const response = await forward();
      if (call > 1) return response;
      first.intentId = ((await response.json()) as { intentId: string }).intentId;
      return unavailable();
    });
    const replay = await clientFor('wallet-api', { fetch: stub }).intents.create(
      { operationType: 'QP_TOPUP', amount: 250 },
      { userId: FRESH },
    );
    expect(calls).toHaveLength(2);
    expect(replay).toMatchObject({ intentId: first.intentId, status: 'SETTLED', amount: '250' });
    const key = (JSON.parse(calls[1]?.body ?? '{}') as { idempotencyKey: string }).idempotencyKey;
    expect(await intentsWithKey(key)).toBe(1);
  });

  it('a network error is retried', async () => {
    const { stub, calls } = recordingFetch((call, forward) => (call === 1 ? Promise.reject(new TypeError('fetch failed')) : forward()));
    expect(await clientFor('wallet-api', { fetch: stub }).accounts.balance('system.revenue.THB')).toMatchObject({
      accountName: 'system.revenue.THB',
    });
    expect(calls).toHaveLength(2);
  });

  it('409 is not retried', async () => {
    const idempotencyKey = randomUUID();
    await wallet().intents.create({ idempotencyKey, operationType: 'QP_TOPUP', amount: 100 }, { userId: FRESH });
    const { stub, calls } = recordingFetch();
    const error = await rejection(
      clientFor('wallet-api', { fetch: stub }).intents.create(
        { idempotencyKey, operationType: 'QP_TOPUP', amount: 999 },
        { userId: FRESH },
      ),
    );
    expect(error.code).toBe('CONFLICT');
    expect(calls).toHaveLength(1);
  });

  it('422 is not retried', async () => {
    const { stub, calls } = recordingFetch();
    const error = await rejection(
      clientFor('wallet-api', { fetch: stub }).intents.create({ operationType: 'QP_TOPUP', amount: 0 }, { userId: FRESH }),
    );
    expect(error.code).toBe('VALIDATION_ERROR');
    expect(calls).toHaveLength(1);
  });

  it('a cancel is not retried (not idempotent), and a 5xx that lasts surfaces after attemptsMax', async () => {
    const cancel = recordingFetch(() => Promise.resolve(unavailable()));
    const canceled = await rejection(
      clientFor('wallet-api', { fetch: cancel.stub }).intents.cancel(randomUUID(), {}, { userId: MERCHANT }),
    );
    expect([canceled.status, canceled.code, cancel.calls.length]).toEqual([503, 'SERVICE_UNAVAILABLE', 1]);

    const read = recordingFetch(() => Promise.resolve(unavailable()));
    const failed = await rejection(
      clientFor('wallet-api', { fetch: read.stub, retry: { attemptsMax: 4, baseDelayMs: 1 } }).intents.get(randomUUID()),
    );
    expect([failed.status, read.calls.length]).toEqual([503, 4]);
  });

  it('every attempt is signed afresh, with a nonce of its own', async () => {
    const { stub, calls } = recordingFetch((call, forward) => (call === 1 ? Promise.resolve(unavailable()) : forward()));
    await clientFor('wallet-api', { fetch: stub }).accounts.balance('system.revenue.THB');
    expect(calls.map((call) => call.headers['x-service-id'])).toEqual(['wallet-api', 'wallet-api']);
    const nonces = calls.map((call) => /;nonce="([^"]+)"/.exec(call.headers['signature-input'] ?? '')?.[1]);
    expect(new Set(nonces).size).toBe(2);
    expect(nonces.every((nonce) => nonce !== undefined)).toBe(true);
  });

  it('no answer at all: PayorchConnectionError after every attempt', async () => {
    const client = createPayorchClient({ baseUrl: 'http://127.0.0.1:1', serviceId: 'wallet-api', secret: 'x', sleep: async () => {} });
    const error = await client.accounts.balance('system.revenue.THB').catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(PayorchConnectionError);
    expect((error as PayorchConnectionError).attempts).toBe(3);
  });

  it('a retry policy out of range is refused at construction', () => {
    expect(() => clientFor('wallet-api', { retry: { attemptsMax: 0, baseDelayMs: 1 } })).toThrow(RangeError);
  });
});

describe('signature schemes', () => {
  it('signs with an HTTP Message Signature by default, covering X-User-Id and the body; a P2P goes through', async () => {
    const client = wallet();
    await client.accounts.create({ userId: PAYER });
    await client.accounts.create({ userId: RECEIVER });
    await client.intents.create({ operationType: 'QP_TOPUP', amount: 500 }, { userId: PAYER });
    const { stub, calls } = recordingFetch();
    const paid = await clientFor('wallet-api', { fetch: stub }).intents.create(
      { operationType: 'P2P_TRANSFER', amount: 120, recipientUserId: RECEIVER },
      { userId: PAYER },
    );
    expect(paid.status).toBe('SETTLED');
    const [sent] = calls;
    expect(sent?.headers['x-signature']).toBeUndefined();
    expect(sent?.headers['x-timestamp']).toBeUndefined();
    expect(sent?.headers['signature-input']).toMatch(
      /^sig1=\("@method" "@path" "@query" "content-digest" "x-user-id"\);created=\d+;keyid="wallet-api";nonce="[^"]+";alg="hmac-sha256"$/,
    );
    expect(sent?.headers.signature).toMatch(/^sig1=:[A-Za-z0-9+/]{43}=:$/);
    expect(sent?.headers['content-digest']).toMatch(/^sha-256=:[A-Za-z0-9+/]{43}=:$/);
  });

  it('sends the admin bearer token instead of a signature when given one: admin routes answer, others refuse', async () => {
    const { stub, calls } = recordingFetch();
    const operator = createPayorchClient({ baseUrl, adminToken: 'test-admin-token', fetch: stub, sleep: async () => {} });
    expect((await operator.admin.audit()).ok).toBe(true);
    expect(calls[0]?.headers.authorization).toBe('Bearer test-admin-token');
    expect(calls[0]?.headers['signature-input']).toBeUndefined();
    expect(calls[0]?.headers['x-signature']).toBeUndefined();
    const refused = await rejection(operator.accounts.balance('system.revenue.THB'));
    expect([refused.status, refused.code]).toEqual([401, 'UNAUTHORIZED']);
    const wrong = createPayorchClient({ baseUrl, adminToken: 'not-the-token', sleep: async () => {} });
    expect((await rejection(wrong.admin.audit())).status).toBe(401);
  });

  it('signs with the older X-Signature when asked, and the service still accepts it', async () => {
    const { stub, calls } = recordingFetch();
    const client = clientFor('wallet-api', { fetch: stub, signatureScheme: 'x-signature' });
    expect(await client.accounts.balance('system.revenue.THB')).toMatchObject({ accountName: 'system.revenue.THB' });
    expect(calls[0]?.headers['x-signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(calls[0]?.headers['signature-input']).toBeUndefined();
  });

  it('an admin write through the client is signed afresh each time, so a repeat is not a replay', async () => {
    const admin = clientFor('admin-tool');
    const body = {
      name: `client-${randomUUID()}`,
      operationType: 'MINIAPP_CREDIT',
      expression: "[{account: 'system.revenue.THB', amount: amount * 0.01}]",
      active: false,
    } as const;
    const first = await admin.admin.feeRules.create(body);
    const second = await admin.admin.feeRules.create(body);
    expect(second.id).not.toBe(first.id);
  });
});
