import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CashManagementEndOfDayReport } from 'iso20022.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runAudit } from '../../src/domain/audit/audit.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { LEDGER_THB, type TransferInput } from '../../src/ledger/ledger.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { jsonStatement, markBetween, q, statementPath } from '../support/statements.js';
import { createUser, intentBody, topUp } from '../support/payments.js';

// docs/rules.md R58 over HTTP: balances at a time, balanceAfter on history rows, statements in
// json, csv and camt.053, and the refusals.
let t: TestApp;
const PAYER = 501;
const PAYEE = 502;
const BULK = 503;
const payer = `user.${PAYER}.THB`;
/** Instants between the postings, as the client sends them (after the postings they follow, before the next). */
const marks: string[] = [];

async function pay(amount: number): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: PAYER,
    body: intentBody({ operationType: 'P2P_TRANSFER', amount, recipientUserId: PAYEE }),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().intentId as string;
}

const get = (path: string) => t.call('GET', path);
const mark = () => markBetween(marks);
const statement = (name: string, from: string, to: string) => jsonStatement(t, name, from, to);

beforeAll(async () => {
  t = await startTestApp();
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await createUser(t, BULK);
  await mark(); // 0: before anything
  await topUp(t, PAYER, 10_000);
  await mark(); // 1
  await pay(1_500);
  await mark(); // 2
  await pay(250);
  await pay(1_000);
  await mark(); // 3
  // Every mark is more than 5 s past before the tests read it as final.
  await sleep(5_100);
}, 90_000);
afterAll(async () => t?.close());
afterEach(async () => {
  await expectLedgerInvariants(t.db);
  expect((await runAudit(t.db)).violations).toEqual([]);
});

describe('GET /accounts/{name}/balance?at=', () => {
  it('answers the balance at instants before, between and after postings, echoing at', async () => {
    const expected = ['0', '10000', '8500', '7250'];
    for (const [index, at] of marks.entries()) {
      const res = await get(`/accounts/${payer}/balance?at=${encodeURIComponent(at)}`);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ accountName: payer, balance: expected[index], currency: 'THB', at });
    }
    const payee = await get(`/accounts/user.${PAYEE}.THB/balance?at=${encodeURIComponent(marks[2] ?? '')}`);
    expect(payee.json().balance).toBe('1500');
    // The live balance is unchanged by the new parameter.
    expect((await get(`/accounts/${payer}/balance`)).json()).toEqual({ accountName: payer, balance: '7250', currency: 'THB' });
  });

  it('reads an offset instant and a ledger id as the same account and moment', async () => {
    const at = marks[2] ?? '';
    const shifted = new Date(at)
      .toISOString()
      .replace('Z', '+00:00')
      .replace(/^(\d{4}-\d{2}-\d{2})T(\d{2})/, (_m, day, hour) => `${day}T${hour}`);
    const res = await get(`/accounts/${ledgerAccountId(payer)}/balance?at=${encodeURIComponent(shifted)}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ accountName: payer, balance: '8500', at: shifted });
  });
});

describe('history rows', () => {
  it('carry balanceAfter, the balance at their posting', async () => {
    const rows = (await get(`/accounts/${payer}/transactions?limit=10`)).json().transactions as Array<{
      amount: string;
      balanceAfter: string;
    }>;
    expect(rows.map((row) => [row.amount, row.balanceAfter])).toEqual([
      ['1000', '7250'],
      ['250', '8250'],
      ['1500', '8500'],
      ['10000', '10000'],
    ]);
    const system = (await get('/accounts/system.nostro.pspx.THB/transactions?limit=1')).json().transactions;
    expect(system.every((row: { balanceAfter: unknown }) => row.balanceAfter === null)).toBe(true);
  });
});

describe('GET /accounts/{name}/statement', () => {
  it('lists the postings of [from, to) with balances that add up, and adjacent statements chain', async () => {
    const [m0, m1, m2, m3] = marks as [string, string, string, string];
    const whole = await statement(payer, m0, m3);
    expect(whole).toMatchObject({ accountName: payer, currency: 'THB', from: m0, to: m3, openingBalance: '0', closingBalance: '7250' });
    expect(whole.entries.map((e) => [e.operationType, e.direction, e.amount, e.feeAmount, e.balanceAfter])).toEqual([
      ['QP_TOPUP', 'CREDIT', '10000', '0', '10000'],
      ['P2P_TRANSFER', 'DEBIT', '1500', '0', '8500'],
      ['P2P_TRANSFER', 'DEBIT', '250', '0', '8250'],
      ['P2P_TRANSFER', 'DEBIT', '1000', '0', '7250'],
    ]);
    expect(whole.entries.every((e) => e.intentId !== null && e.refundId === null && e.at >= m0 && e.at < m3)).toBe(true);
    const moved = whole.entries.reduce((sum, e) => sum + (e.direction === 'CREDIT' ? 1n : -1n) * BigInt(e.amount), 0n);
    expect(BigInt(whole.openingBalance) + moved).toBe(BigInt(whole.closingBalance));

    const parts = [await statement(payer, m0, m1), await statement(payer, m1, m2), await statement(payer, m2, m3)];
    for (const [index, part] of parts.entries()) {
      const next = parts[index + 1];
      if (next !== undefined) expect(part.closingBalance).toBe(next.openingBalance);
    }
    expect(parts.flatMap((part) => part.entries)).toEqual(whole.entries);
    expect(parts.map((part) => part.entries.length)).toEqual([1, 1, 2]);
  });

  it('answers csv with the same entries as json', async () => {
    const [m0, , , m3] = marks as [string, string, string, string];
    const json = await statement(payer, m0, m3);
    const res = await get(statementPath(payer, m0, m3, 'csv'));
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv/);
    const [header, ...lines] = res.body.trimEnd().split('\r\n');
    expect(header).toBe('at,intentId,refundId,operationType,direction,amount,feeAmount,balanceAfter');
    expect(lines).toEqual(
      json.entries.map((e) => [e.at, e.intentId, '', e.operationType, e.direction, e.amount, e.feeAmount, e.balanceAfter].join(',')),
    );
  });

  it('answers camt.053.001.08 that an independent ISO 20022 parser reads back with the same balances and entries', async () => {
    const [m0, m1, , m3] = marks as [string, string, string, string];
    for (const [from, to] of [
      [m0, m3],
      [m1, m3],
    ] as const) {
      const json = await statement(payer, from, to);
      const res = await get(statementPath(payer, from, to, 'camt053'));
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/xml/);
      expect(res.body).toContain('xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"');
      const report = CashManagementEndOfDayReport.fromXML(res.body);
      expect(report.statements).toHaveLength(1);
      const [parsed] = report.statements;
      expect(parsed?.account).toMatchObject({ accountNumber: payer, currency: 'THB' });
      expect(parsed?.agent).toEqual({ routingNumber: 'payorch' });
      expect(parsed?.fromDate?.toISOString()).toBe(new Date(from).toISOString());
      expect(parsed?.toDate?.toISOString()).toBe(new Date(to).toISOString());
      // The parser reads amounts as floating-point minor units.
      const balances = parsed?.balances.map((b) => [b.type, Math.round(b.amount), b.currency, b.creditDebitIndicator]);
      expect(balances).toEqual([
        ['OPBD', Number(json.openingBalance), 'THB', 'credit'],
        ['CLBD', Number(json.closingBalance), 'THB', 'credit'],
      ]);
      expect(
        parsed?.entries.map((e) => [
          e.referenceId,
          Math.round(e.amount),
          e.currency,
          e.creditDebitIndicator,
          e.bookingDate.getTime(),
          e.proprietaryCode,
        ]),
      ).toEqual(
        json.entries.map((e) => [
          e.intentId,
          Number(e.amount),
          'THB',
          e.direction === 'CREDIT' ? 'credit' : 'debit',
          new Date(e.at).getTime(),
          e.operationType,
        ]),
      );
    }
  });

  it('answers the console the same statement at /admin/accounts/{name}/statement with the admin token, and nothing without it', async () => {
    const [m0, , , m3] = marks as [string, string, string, string];
    const url = statementPath(payer, m0, m3).replace('/accounts/', '/admin/accounts/');
    const admin = await t.app.inject({ method: 'GET', url, headers: { authorization: 'Bearer test-admin-token' } });
    expect(admin.statusCode, admin.body).toBe(200);
    expect(admin.json()).toEqual(await statement(payer, m0, m3));
    const csv = await t.app.inject({ method: 'GET', url: `${url}&format=csv`, headers: { authorization: 'Bearer test-admin-token' } });
    expect(csv.headers['content-disposition']).toBe(`attachment; filename="statement-${payer}.csv"`);
    const anonymous = await t.app.inject({ method: 'GET', url });
    expect(anonymous.statusCode).toBe(401);
  });

  it('refuses json past 10,000 entries naming csv, and streams them all as csv', async () => {
    const bulk = `user.${BULK}.THB`;
    const from = await mark();
    const equity = ledgerAccountId('system.equity.THB');
    const transfers = (count: number): TransferInput[] =>
      Array.from({ length: count }, () => ({
        id: randomUUID(),
        debitAccountId: equity,
        creditAccountId: ledgerAccountId(bulk),
        amount: 1n,
        ledger: LEDGER_THB,
        code: 1,
        flags: 0,
      }));
    for (const count of [8_000, 2_001]) expect(await t.ledger.createTransfers(t.db, transfers(count))).toEqual([]);
    const to = new Date(Date.now() + 1).toISOString();
    await sleep(20);
    const json = await get(statementPath(bulk, from, to));
    expect(json.statusCode).toBe(422);
    expect(json.json()).toMatchObject({ error: 'VALIDATION_ERROR', message: expect.stringContaining('csv') });
    const csv = await get(statementPath(bulk, from, to, 'csv'));
    expect(csv.statusCode).toBe(200);
    const lines = csv.body.trimEnd().split('\r\n');
    expect(lines).toHaveLength(10_002);
    expect(lines.at(-1)?.endsWith(',1,0,10001')).toBe(true);
  }, 30_000);

  it('refuses hostile queries with 422 (404 for an unknown account) and changes nothing', async () => {
    const before = await t.db.query('SELECT count(*)::text AS n, coalesce(sum(amount), 0)::text AS s FROM ledger_account_history');
    const [m0, , , m3] = marks as [string, string, string, string];
    const future = new Date(Date.now() + 60_000).toISOString();
    const refusals: Array<[string, string, number]> = [
      ['future at', `/accounts/${payer}/balance?at=${encodeURIComponent(future)}`, 422],
      ['at without offset', `/accounts/${payer}/balance?at=2026-01-01T00:00:00`, 422],
      ['at a date only', `/accounts/${payer}/balance?at=2026-01-01`, 422],
      ['at 30 February', `/accounts/${payer}/balance?at=2026-02-30T00:00:00Z`, 422],
      ['at hour 24', `/accounts/${payer}/balance?at=2026-01-01T24:00:00Z`, 422],
      ['at as words', `/accounts/${payer}/balance?at=yesterday`, 422],
      ['at of a system account', `/accounts/system.revenue.THB/balance?at=${encodeURIComponent(m0)}`, 422],
      [
        'an injection-looking name',
        `/accounts/${encodeURIComponent("user.1.THB'; DROP TABLE ledger_account_history; --")}/balance?at=${encodeURIComponent(m0)}`,
        422,
      ],
      ['an unknown account', `/accounts/user.999999.THB/balance?at=${encodeURIComponent(m0)}`, 404],
      ['from equal to to', statementPath(payer, m3, m3), 422],
      ['from after to', statementPath(payer, m3, m0), 422],
      ['future to', statementPath(payer, m0, future), 422],
      ['unparsable from', statementPath(payer, '2026-13-01T00:00:00Z', m3), 422],
      ['unparsable to', statementPath(payer, m0, "1' OR '1'='1"), 422],
      ['statement of a system account', statementPath('system.transit.PSPX.THB', m0, m3, 'csv'), 422],
      ['statement by an injection-looking name', statementPath(q('user.1.THB"--'), m0, m3, 'camt053'), 422],
      ['an unknown format', `${statementPath(payer, m0, m3)}&format=pdf`, 422],
      ['a missing to', `/accounts/${payer}/statement?from=${q(m0)}`, 422],
    ];
    for (const [name, path, status] of refusals) {
      const res = await get(path);
      expect({ name, status: res.statusCode }).toEqual({ name, status });
      expect(res.json().error, name).toBe(status === 404 ? 'NOT_FOUND' : 'VALIDATION_ERROR');
    }
    const after = await t.db.query('SELECT count(*)::text AS n, coalesce(sum(amount), 0)::text AS s FROM ledger_account_history');
    expect(after.rows).toEqual(before.rows);
  });
});
