import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/adapters/database.js';
import { type AuditCheck, type AuditResult, auditInvariants, formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { transferId } from '../../src/domain/intents/money/money-path.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { AccountFlags, LEDGER_THB, TransferFlags } from '../../src/ledger/ledger.js';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import { createOutboxWorker, OUTBOX_DEFAULTS } from '../../src/workers/outbox-worker.js';
import { createPspWorker } from '../../src/workers/psp-worker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createMerchant, createUser, intentBody, topUp } from '../support/payments.js';
import { captureLogger, drain, payout, testPspSettings } from '../support/workers.js';

/** User ids of this file only: the payer lock is database-wide on a shared PostgreSQL server. */
const [PAYER, PAYEE, BROKE, PSPX_USER] = [6101, 6102, 6103, 6104] as const;
const MERCHANT = 6107;
const wallet = (userId: number) => `user.${userId}.THB`;
const P2P_TRANSIT = 'system.transit.INTERNAL_P2P.THB';

let t: TestApp;
/** Intents of each final shape, made through the HTTP interface in beforeAll. */
const ids = { settledP2p: '', settledWithFee: '', failedInvoice: '', canceledInvoice: '', pspx: '' };

beforeAll(async () => {
  t = await startTestApp();
  for (const user of [PAYER, PAYEE, BROKE, PSPX_USER]) await createUser(t, user);
  await createMerchant(t, MERCHANT);
  await topUp(t, PAYER, 100_000);
  await topUp(t, PSPX_USER, 100_000);
  ids.settledP2p = await created(
    t.call('POST', '/intents', { user: PAYER, body: intentBody({ operationType: 'P2P_TRANSFER', amount: 2_500, recipientUserId: PAYEE }) }),
    'SETTLED',
  );
  // The shipped WITHDRAWAL rule charges a PRE fee to system.revenue.THB.
  ids.settledWithFee = await created(
    t.call('POST', '/intents', { user: PAYER, body: intentBody({ operationType: 'WITHDRAWAL', amount: 4_000, externalRef: 'audit-w1' }) }),
    'SETTLED',
  );
  ids.failedInvoice = await created(issueInvoice(900), 'CREATED');
  const confirm = await t.call('POST', `/intents/${ids.failedInvoice}/confirm`, {
    user: BROKE,
    body: { payerLedgerAccountId: ledgerAccountId(wallet(BROKE)), payerUserId: BROKE, idempotencyKey: randomUUID() },
  });
  expect(confirm.json().status, confirm.body).toBe('FAILED');
  ids.canceledInvoice = await created(issueInvoice(700), 'CREATED');
  expect(
    (await t.call('POST', `/intents/${ids.canceledInvoice}/cancel`, { user: MERCHANT, body: { reason: 'changed mind' } })).statusCode,
  ).toBe(200);
  expect((await t.call('POST', '/accounts/register-ipps', { user: PSPX_USER, body: pspxCustomer })).statusCode).toBe(201);
  ids.pspx = await created(
    t.call('POST', '/intents', {
      user: PSPX_USER,
      body: intentBody({
        operationType: 'PSPX_WITHDRAWAL',
        amount: 1_200,
        metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: '0812345678' } },
      }),
    }),
    'AUTHORIZED',
  );
});
afterAll(async () => t?.close());

const pspxCustomer = {
  externalUserId: 'ext-6104',
  customerEnglishName: 'Somchai Jaidee',
  senderTaxId: '1101700203451',
  senderAccountName: 'Somchai Jaidee',
  documentExpiry: '2031-12-31',
  dateOfBirth: '1988-02-29',
  phoneNumber: '0812345678',
  nationality: 'TH',
  address: '99 Sukhumvit Road, Khlong Toei, Bangkok 10110',
};

function issueInvoice(amount: number) {
  return t.call('POST', '/intents', {
    user: MERCHANT,
    body: intentBody({ operationType: 'INVOICE_PAYMENT', amount, toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`) }),
  });
}

async function created(response: ReturnType<TestApp['call']>, status: string): Promise<string> {
  const res = await response;
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().status).toBe(status);
  return res.json().intentId as string;
}

class Rollback extends Error {}

/** Corrupts inside a transaction, audits what that transaction sees, and rolls everything back. */
async function auditAfter(corrupt: (tx: Sql) => Promise<void>): Promise<AuditResult> {
  let result: AuditResult | null = null;
  await t.db
    .transaction(async (tx) => {
      await corrupt(tx);
      result = await auditInvariants(tx);
      throw new Rollback();
    })
    .catch((error: unknown) => {
      if (!(error instanceof Rollback)) throw error;
    });
  if (result === null) throw new Error('the audit did not run');
  return result;
}

const checksOf = (result: AuditResult) => [...new Set(result.violations.map((v) => v.check))].sort();

function expectViolation(result: AuditResult, check: AuditCheck, where: { intentId?: string; account?: string } = {}) {
  expect(result.ok).toBe(false);
  expect(result.violations, result.violations.map(formatViolation).join('\n')).toContainEqual(expect.objectContaining({ check, ...where }));
}

async function rawTransfer(
  tx: Sql,
  from: string,
  to: string,
  amount: bigint,
  extra: { id?: string; flags?: number; timeoutS?: number } = {},
) {
  const results = await t.ledger.createTransfers(tx, [
    {
      id: extra.id ?? randomUUID(),
      debitAccountId: from,
      creditAccountId: to,
      amount,
      ledger: LEDGER_THB,
      code: 1,
      flags: extra.flags ?? TransferFlags.none,
      timeoutS: extra.timeoutS ?? 0,
    },
  ]);
  expect(results).toEqual([]);
}

describe('a database moved only by the service passes the audit', () => {
  it('is ok after settled, failed, canceled and in-flight intents, on a snapshot and on the caller executor', async () => {
    const result = await runAudit(t.db);
    expect(result.violations.map(formatViolation)).toEqual([]);
    expect(result).toEqual({ ok: true, checkedAt: expect.stringMatching(/Z$/), violations: [] });
    expect((await auditInvariants(t.db)).ok).toBe(true);
  });

  it('accepts a PSPX sub-state chain interleaved with the intent statuses, and a PSP exit into MANUAL_REVIEW', async () => {
    const result = await auditAfter(async (tx) => {
      await appendTrail(tx, ids.pspx, [
        ['NEW', 'QUERY_PENDING'],
        ['QUERY_PENDING', 'QUERIED'],
        ['QUERIED', 'CONFIRM_PENDING'],
        ['CONFIRM_PENDING', 'INQUIRING'],
        ['INQUIRING', 'MANUAL_REVIEW'],
      ]);
      await tx.query("UPDATE intents SET status = 'MANUAL_REVIEW' WHERE id = $1 AND status = 'AUTHORIZED'", [ids.pspx]);
    });
    expect(result.violations.map(formatViolation)).toEqual([]);
  });
});

async function appendTrail(tx: Sql, intentId: string, moves: ReadonlyArray<readonly [string | null, string]>) {
  for (const [from, to] of moves) {
    await tx.query('INSERT INTO intent_events (intent_id, status_from, status_to) VALUES ($1, $2, $3)', [intentId, from, to]);
  }
}

describe('each kind of corruption is reported under its check name', () => {
  it('a posted transfer for a FAILED intent: unsettled_no_money (and the transit it passed through)', async () => {
    const result = await auditAfter(async (tx) => {
      const transit = ledgerAccountId('system.transit.MERCHANT_INVOICE.THB');
      await rawTransfer(tx, ledgerAccountId(wallet(PAYER)), transit, 900n);
      await rawTransfer(tx, transit, ledgerAccountId(`merchant.${MERCHANT}.THB`), 900n, { id: transferId(ids.failedInvoice, 'credit') });
    });
    expectViolation(result, 'unsettled_no_money', { intentId: ids.failedInvoice });
    expect(checksOf(result)).toEqual(['unsettled_no_money']);
  });

  it('a raw ledger transfer through a transit account: transit_balanced', async () => {
    const result = await auditAfter((tx) => rawTransfer(tx, ledgerAccountId('system.equity.THB'), ledgerAccountId(P2P_TRANSIT), 500n));
    expectViolation(result, 'transit_balanced', { account: P2P_TRANSIT });
    expect(checksOf(result)).toEqual(['transit_balanced']);
  });

  it('a reservation beside the in-flight ones: transit_balanced (pending side)', async () => {
    const result = await auditAfter((tx) =>
      rawTransfer(tx, ledgerAccountId(wallet(PAYER)), ledgerAccountId('system.transit.PSPX.THB'), 10n, { flags: TransferFlags.pending }),
    );
    expectViolation(result, 'transit_balanced', { account: 'system.transit.PSPX.THB' });
  });

  it('an event whose statusFrom is not the previous status, and a trail that ends elsewhere: audit_trail, audit_trail_status', async () => {
    const result = await auditAfter((tx) => appendTrail(tx, ids.settledP2p, [['CREATED', 'SETTLED']]));
    expectViolation(result, 'audit_trail', { intentId: ids.settledP2p });
    expect(checksOf(result)).toEqual(['audit_trail']);

    const leaves = await auditAfter((tx) => appendTrail(tx, ids.settledP2p, [['SETTLED', 'CANCELED']]));
    expectViolation(leaves, 'audit_trail', { intentId: ids.settledP2p });
    expect(leaves.violations.find((v) => v.check === 'audit_trail')?.detail).toContain('not in the state table');
    expectViolation(leaves, 'audit_trail_status', { intentId: ids.settledP2p });
  });

  it('PSP sub-states off the PSPX channel, out of order, or after the chain ended: audit_trail', async () => {
    const offChannel = await auditAfter((tx) => appendTrail(tx, ids.settledP2p, [['NEW', 'QUERY_PENDING']]));
    expect(offChannel.violations).toContainEqual(
      expect.objectContaining({ check: 'audit_trail', detail: expect.stringContaining('without PSP sub-states') }),
    );

    const skipped = await auditAfter((tx) => appendTrail(tx, ids.pspx, [['NEW', 'CONFIRMED']]));
    expect(skipped.violations).toContainEqual(
      expect.objectContaining({ check: 'audit_trail', intentId: ids.pspx, detail: expect.stringContaining('PSP table') }),
    );

    const broken = await auditAfter((tx) => appendTrail(tx, ids.pspx, [['QUERY_PENDING', 'QUERIED']]));
    expect(broken.violations).toContainEqual(
      expect.objectContaining({ check: 'audit_trail', detail: expect.stringContaining('previous PSP sub-state') }),
    );
  });

  it('an intent without its creation event: audit_trail_status', async () => {
    const result = await auditAfter(async (tx) => {
      const id = randomUUID();
      await tx.query(
        `INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel,
                              to_account_name, amount, status)
         VALUES ($1, $2, 'wallet-api', 'x', 0, 'P2P_TRANSFER', 'INTERNAL_P2P', $3, 1, 'CREATED')`,
        [id, randomUUID(), wallet(PAYEE)],
      );
    });
    expectViolation(result, 'audit_trail_status');
  });

  it('a guarded account driven below zero through raw SQL: guarded_account_negative (and the ledger checks)', async () => {
    const result = await auditAfter(async (tx) => {
      await tx.query(`UPDATE ledger_balances SET debits_posted = credits_posted + 1 WHERE account_id = $1`, [
        ledgerAccountId(wallet(PAYEE)),
      ]);
    });
    expectViolation(result, 'guarded_account_negative', { account: wallet(PAYEE) });
    expectViolation(result, 'ledger_guarded_limits');
    expectViolation(result, 'ledger_balanced');
  });

  it('a pending transfer left pending past its timeout and the grace: pending_outlived_timeout; inside the grace: not yet', async () => {
    const late = randomUUID();
    const recent = randomUUID();
    const result = await auditAfter(async (tx) => {
      const [a, b] = [randomUUID(), randomUUID()];
      expect(
        await t.ledger.createAccounts(
          tx,
          [a, b].map((id) => ({ id, ledger: LEDGER_THB, code: 1, flags: AccountFlags.none })),
        ),
      ).toEqual([]);
      await rawTransfer(tx, a, b, 5n, { id: late, flags: TransferFlags.pending, timeoutS: 1 });
      await rawTransfer(tx, a, b, 6n, { id: recent, flags: TransferFlags.pending, timeoutS: 1 });
      await tx.query("UPDATE ledger_transfers SET expires_at = now() - interval '2 minutes' WHERE id = $1", [late]);
      await tx.query("UPDATE ledger_transfers SET expires_at = now() - interval '10 seconds' WHERE id = $1", [recent]);
    });
    expect(checksOf(result)).toEqual(['pending_outlived_timeout']);
    expect(result.violations).toHaveLength(1);
    expect(result.violations[0]?.detail).toContain(late);
  });

  it('a settled intent whose credit leg is short: settled_postings', async () => {
    const result = await auditAfter(async (tx) => {
      const moved = await tx.query('UPDATE ledger_transfers SET amount = amount - 1 WHERE id = $1', [transferId(ids.settledP2p, 'credit')]);
      expect(moved.rowCount).toBe(1);
    });
    expectViolation(result, 'settled_postings', { intentId: ids.settledP2p });
  });

  it('a settled intent without its fee leg: settled_postings', async () => {
    const result = await auditAfter(async (tx) => {
      const feeId = transferId(ids.settledWithFee, `fee/${ledgerAccountId('system.revenue.THB')}`);
      const gone = await tx.query('DELETE FROM ledger_transfers WHERE id = $1', [feeId]);
      expect(gone.rowCount).toBe(1);
    });
    expectViolation(result, 'settled_postings', { intentId: ids.settledWithFee });
  });

  it('an in-flight intent whose reservation was voided: in_flight_reservation', async () => {
    const result = await auditAfter(async (tx) => {
      expect(
        await t.ledger.createTransfers(tx, [
          {
            id: randomUUID(),
            pendingId: transferId(ids.pspx, 'reserve'),
            ledger: LEDGER_THB,
            code: 1,
            flags: TransferFlags.voidPendingTransfer,
          },
        ]),
      ).toEqual([]);
    });
    expectViolation(result, 'in_flight_reservation', { intentId: ids.pspx });
    expectViolation(result, 'transit_balanced', { account: 'system.transit.PSPX.THB' });
  });
});

describe('the real PSP worker and outbox leave trails and money the audit accepts', () => {
  /** 200 ms: a held confirm (9998, 9997) becomes a client-side time-out quickly. */
  const workers = () => {
    const client = createPspxClient({ baseUrl: t.pspxSimulator.url, timeoutMs: 200, backoffBaseMs: 1, backoffCapMs: 5 });
    const log = captureLogger();
    return {
      psp: createPspWorker({ db: t.db, pspx: client, log, settings: testPspSettings }),
      outbox: createOutboxWorker({
        db: t.db,
        ledger: t.ledger,
        publisher: new StatusPublisher(t.broker, log),
        log,
        settings: { ...OUTBOX_DEFAULTS, backoffBaseMs: 1 },
      }),
    };
  };
  const expectClean = async () => expect((await runAudit(t.db)).violations.map(formatViolation)).toEqual([]);

  it('every simulator outcome, then both resolutions of MANUAL_REVIEW, checked between the steps', async () => {
    const { psp, outbox } = workers();
    try {
      // ids.pspx (receiver …5678) settles here too. One at a time: one payer (docs/rules.md R22).
      const outcomes: string[] = [];
      for (const receiver of ['0812341234', '0812349999', '0812349997', '0812349998', '0812359998'])
        outcomes.push(await payout(t, PSPX_USER, receiver, 1_000));
      await expectClean();
      await drain(psp, outbox);
      const [, , , reviewA, reviewB] = outcomes;
      const statuses = await Promise.all(outcomes.map(async (id) => (await t.call('GET', `/intents/${id}`)).json().status as string));
      expect(statuses).toEqual(['SETTLED', 'FAILED', 'SETTLED', 'MANUAL_REVIEW', 'MANUAL_REVIEW']);
      await expectClean();

      const resolve = (id: string | undefined, body: Record<string, string>) =>
        t.app.inject({
          method: 'POST',
          url: `/admin/intents/${id}/resolve`,
          headers: { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        });
      expect((await resolve(reviewA, { resolution: 'FAILED', reason: 'provider says not paid' })).statusCode).toBe(200);
      // FAILED at once, the void still queued: the reservation is held until the outbox runs.
      await expectClean();
      expect((await resolve(reviewB, { resolution: 'CONFIRMED' })).statusCode).toBe(200);
      await expectClean();
      await drain(psp, outbox);
      await expectClean();
    } finally {
      await outbox.stop();
    }
  });
});

describe('GET /admin/audit', () => {
  const get = (headers: Record<string, string> = {}) => t.app.inject({ method: 'GET', url: '/admin/audit', headers });

  it('answers the admin bearer token and an admin key; 401 without credentials, 403 for a key without admin', async () => {
    const res = await get({ authorization: 'Bearer test-admin-token' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ ok: true, checkedAt: expect.any(String), violations: [] });
    expect((await t.call('GET', '/admin/audit', { service: 'admin-tool' })).statusCode).toBe(200);
    expect((await get()).statusCode).toBe(401);
    expect((await get({ authorization: 'Bearer wrong' })).statusCode).toBe(401);
    const forbidden = await t.call('GET', '/admin/audit', { service: 'wallet-api' });
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.json().error).toBe('FORBIDDEN');
  });

  it('takes a since date for the per-intent checks; a bad one is 422', async () => {
    const since = encodeURIComponent(new Date(Date.now() + 60_000).toISOString());
    const admin = { authorization: 'Bearer test-admin-token' };
    expect((await t.app.inject({ method: 'GET', url: `/admin/audit?since=${since}`, headers: admin })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/admin/audit?since=yesterday', headers: admin })).statusCode).toBe(422);
  });

  // Last: it leaves the database corrupted.
  it('reports a committed corruption as 200 with ok false and each violation', async () => {
    await appendTrail(t.db, ids.settledWithFee, [['AUTHORIZED', 'FAILED']]);
    const res = await get({ authorization: 'Bearer test-admin-token' });
    expect(res.statusCode).toBe(200);
    const body = res.json() as AuditResult;
    expect(body.ok).toBe(false);
    expect(body.violations).toContainEqual(expect.objectContaining({ check: 'audit_trail', intentId: ids.settledWithFee }));
    expect(body.violations).toContainEqual(expect.objectContaining({ check: 'audit_trail_status', intentId: ids.settledWithFee }));
  });
});
