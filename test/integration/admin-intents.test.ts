import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIST_LIMIT_DEFAULT } from '../../src/domain/intents/store/intent-listing.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createMerchant, createUser, intentBody, topUp } from '../support/payments.js';

interface ListedIntent {
  intentId: string;
  serviceId: string;
  status: string;
  operationType: string;
  channel: string;
  createdAt: string;
}
interface Page {
  intents: ListedIntent[];
  nextCursor: string | null;
}

const MERCHANT = 7;
const ADMIN = { authorization: 'Bearer test-admin-token' };
let t: TestApp;

const get = (url: string) => t.app.inject({ method: 'GET', url, headers: ADMIN });

async function page(query: string): Promise<Page> {
  const res = await get(`/admin/intents${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Page;
}

/** Walks every page of a query; returns the ids in the order served. */
async function walk(query: Record<string, string>, limit: number, between?: (pageIndex: number) => Promise<void>): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let pageIndex = 0; pageIndex < 1_000; pageIndex += 1) {
    const params = new URLSearchParams({ ...query, limit: String(limit), ...(cursor === null ? {} : { cursor }) });
    const result = await page(`?${params}`);
    expect(result.intents.length).toBeLessThanOrEqual(limit);
    ids.push(...result.intents.map((i) => i.intentId));
    cursor = result.nextCursor;
    if (cursor === null) return ids;
    await between?.(pageIndex);
  }
  throw new Error('paging did not end');
}

/** Rows written straight to the table, to control created_at to the microsecond (ties included). */
async function insertIntent(serviceId: string, createdAt: string, status = 'SETTLED'): Promise<string> {
  const id = randomUUID();
  await t.db.query(
    `INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel, to_account_name, amount, status, created_at, updated_at)
     VALUES ($1, $2, $3, 'fixture', 1, 'P2P_TRANSFER', 'INTERNAL_P2P', 'user.2.THB', 100, $4, $5::timestamptz, $5::timestamptz)`,
    [id, randomUUID(), serviceId, status, createdAt],
  );
  return id;
}

async function allIdsInOrder(where = 'true', params: unknown[] = []): Promise<string[]> {
  const { rows } = await t.db.query<{ id: string }>(`SELECT id FROM intents WHERE ${where} ORDER BY created_at DESC, id DESC`, params);
  return rows.map((r) => r.id);
}

let invoiceId: string;
beforeAll(async () => {
  t = await startTestApp();
  await createUser(t, 1);
  await createUser(t, 2);
  await createMerchant(t, MERCHANT);
  await topUp(t, 1, 100_000);
  for (let i = 0; i < 3; i += 1) {
    const res = await t.call('POST', '/intents', {
      user: 1,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 2 }),
    });
    expect(res.statusCode, res.body).toBe(201);
  }
  const invoice = await t.call('POST', '/intents', {
    user: MERCHANT,
    body: intentBody({ operationType: 'INVOICE_PAYMENT', amount: 500, toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`) }),
  });
  invoiceId = invoice.json().intentId;
  // Another service's intents, among them 12 that share one timestamp and 4 a millisecond apart
  // only in microseconds: the cursor must order and resume on those exactly.
  for (let i = 0; i < 12; i += 1) await insertIntent('exchange', '2024-03-01T10:00:00.123456Z');
  for (const us of ['100', '200', '300', '400']) await insertIntent('exchange', `2024-03-01T10:00:00.123${us}Z`);
  await insertIntent('exchange', '2024-02-01T00:00:00Z', 'FAILED');
});
afterAll(async () => t?.close());

describe('GET /admin/intents', () => {
  it('needs the admin token or an admin key: 401 unsigned, 403 for a service key without admin', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/admin/intents' })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: '/admin/intents', headers: { authorization: 'Bearer wrong' } })).statusCode).toBe(401);
    const walletApi = await t.call('GET', '/admin/intents');
    expect(walletApi.statusCode).toBe(403);
    expect(walletApi.json().error).toBe('FORBIDDEN');
    expect((await t.call('GET', '/admin/intents', { service: 'admin-tool' })).statusCode).toBe(200);
  });

  it('lists every service newest first, 50 by default', async () => {
    const all = await allIdsInOrder();
    expect(all.length).toBeLessThan(LIST_LIMIT_DEFAULT);
    const result = await page('');
    expect(result.intents.map((i) => i.intentId)).toEqual(all);
    expect(result.nextCursor).toBeNull();
    expect(new Set(result.intents.map((i) => i.serviceId))).toEqual(new Set(['wallet-api', 'exchange']));
  });

  it('pages through everything without duplicates or gaps, ties on created_at included', async () => {
    const all = await allIdsInOrder();
    for (const limit of [1, 5, 7, all.length, all.length + 1]) {
      const ids = await walk({}, limit);
      expect(ids, `limit ${limit}`).toEqual(all);
    }
  });

  it('stays stable while intents are created between pages', async () => {
    const before = await allIdsInOrder();
    const created: string[] = [];
    const ids = await walk({}, 4, async () => {
      const res = await t.call('POST', '/intents', {
        user: 1,
        body: intentBody({ operationType: 'P2P_TRANSFER', amount: 1, recipientUserId: 2 }),
      });
      created.push(res.json().intentId);
    });
    expect(created.length).toBeGreaterThan(2);
    // The walk began before these were created: it shows exactly the rows it started with.
    expect(ids).toEqual(before);
    expect((await walk({}, 50)).slice(0, created.length).sort()).toEqual([...created].sort());
  });

  it('filters by status, operationType, channel, serviceId and a created window (from inclusive, to exclusive)', async () => {
    const byStatus = await walk({ status: 'CREATED' }, 50);
    expect(byStatus).toEqual([invoiceId]);
    const invoices = await page('?operationType=INVOICE_PAYMENT&channel=MERCHANT_INVOICE');
    expect(invoices.intents.map((i) => i.intentId)).toEqual([invoiceId]);
    expect(await walk({ serviceId: 'exchange' }, 3)).toEqual(await allIdsInOrder(`service_id = 'exchange'`));
    expect((await walk({ serviceId: 'exchange', status: 'FAILED' }, 3)).length).toBe(1);
    const window = await walk({ createdFrom: '2024-03-01T10:00:00.123Z', createdTo: '2024-03-01T10:00:00.124Z' }, 5);
    expect(window).toEqual(await allIdsInOrder(`created_at >= '2024-03-01T10:00:00.123Z' AND created_at < '2024-03-01T10:00:00.124Z'`));
    expect(window.length).toBe(16);
    expect(await walk({ createdFrom: '2024-02-01T00:00:00Z', createdTo: '2024-02-01T00:00:00Z' }, 5)).toEqual([]);
    expect((await walk({ createdFrom: '2024-02-01T00:00:00Z', createdTo: '2024-02-01T00:00:00.000001Z' }, 5)).length).toBe(1);
  });

  it('refuses a bad limit, filter or cursor with 422 VALIDATION_ERROR', async () => {
    for (const query of [
      '?limit=0',
      '?limit=201',
      '?limit=abc',
      '?status=DONE',
      '?operationType=NOPE',
      '?createdFrom=yesterday',
      '?cursor=not-a-cursor',
      '?unknown=1',
    ]) {
      const res = await get(`/admin/intents${query}`);
      expect(res.statusCode, query).toBe(422);
      expect(res.json().error, query).toBe('VALIDATION_ERROR');
    }
    expect((await page('?limit=200')).nextCursor).toBeNull();
  });
});

describe('GET /admin/intents/{id}', () => {
  it("reads another service's intent with its audit trail", async () => {
    const res = await get(`/admin/intents/${invoiceId}`);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      intentId: invoiceId,
      serviceId: 'wallet-api',
      operationType: 'INVOICE_PAYMENT',
      status: 'CREATED',
      amount: '500',
    });
    expect(body.events.map((e: { statusTo: string }) => e.statusTo)).toEqual(['CREATED']);
    // The service-facing route keeps tenant isolation; only the admin route crosses it.
    expect((await t.call('GET', `/intents/${invoiceId}`, { service: 'mobile-gateway' })).statusCode).toBe(404);
    expect((await t.call('GET', `/admin/intents/${invoiceId}`, { service: 'admin-tool' })).statusCode).toBe(200);
  });

  it('answers 404 for an unknown intent, 403 for a key without admin, 401 unsigned', async () => {
    expect((await get(`/admin/intents/${randomUUID()}`)).statusCode).toBe(404);
    expect((await t.call('GET', `/admin/intents/${invoiceId}`)).statusCode).toBe(403);
    expect((await t.app.inject({ method: 'GET', url: `/admin/intents/${invoiceId}` })).statusCode).toBe(401);
  });
});
