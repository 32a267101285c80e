import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseError } from '../../src/adapters/database-error.js';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createUser, topUp } from '../support/payments.js';

/**
 * What a failing statement leaves in the log: its SQLSTATE and a name for the statement, never
 * the SQL's values. The driver's own message here would quote the marker ("invalid input syntax
 * for type integer: "…""), and PGlite's error also carries the SQL text and every parameter.
 */

const PAYER = 7501;
const PAYEE = 7502;
const MARKER = `leak-marker-${randomUUID()}`;
const logLines: string[] = [];
let t: TestApp;
let failNextTransfer = false;

/** The ledger call of a payment runs one more statement, with the marker as its parameter, when told to. */
const failingWithMarker = (ledger: Ledger): Ledger => ({
  ...ledger,
  createAccounts: (sql, accounts) => ledger.createAccounts(sql, accounts),
  lookupAccounts: (sql, ids) => ledger.lookupAccounts(sql, ids),
  lookupTransfers: (sql, ids) => ledger.lookupTransfers(sql, ids),
  expirePendingTransfers: (sql, max) => ledger.expirePendingTransfers(sql, max),
  async createTransfers(sql, transfers) {
    if (failNextTransfer) {
      failNextTransfer = false;
      await sql.query('SELECT $1::integer AS n', [MARKER]);
    }
    return ledger.createTransfers(sql, transfers);
  },
});

beforeAll(async () => {
  t = await startTestApp({ wrapLedger: failingWithMarker, logStream: { write: (line) => void logLines.push(line) } });
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await topUp(t, PAYER, 100_000);
});
afterAll(async () => t?.close());

describe('database errors in logs and answers', () => {
  it('the adapter throws the SQLSTATE and a statement name, not the parameters', async () => {
    const error = await t.db.query('SELECT $1::integer AS n', [MARKER]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseError);
    expect(error).toMatchObject({ code: '22P02', statement: expect.stringMatching(/^SELECT #[0-9a-f]{8}$/) });
    expect(JSON.stringify(error, Object.getOwnPropertyNames(error))).not.toContain(MARKER);
  });

  it('a payment whose statement fails logs the SQLSTATE and the statement name only, and moves no money', async () => {
    logLines.length = 0;
    failNextTransfer = true;
    const comment = `comment-${MARKER}`;
    const res = await t.call('POST', '/intents', {
      user: PAYER,
      body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: PAYEE, comment },
    });
    expect(res.statusCode).toBe(500);
    expect(res.body).not.toContain(MARKER);
    const log = logLines.join('\n');
    expect(log).toContain('22P02');
    expect(log).toMatch(/SELECT #[0-9a-f]{8}/);
    expect(log).not.toContain(MARKER);
    expect(log).not.toMatch(/::integer|invalid input syntax/);
    const audit = await runAudit(t.db);
    expect(audit.violations.map(formatViolation)).toEqual([]);
  });

  it('a request body never reaches a log line, on success or refusal', async () => {
    logLines.length = 0;
    const marker = `body-${MARKER}`;
    const ok = await t.call('POST', '/intents', {
      user: PAYER,
      body: {
        idempotencyKey: randomUUID(),
        operationType: 'P2P_TRANSFER',
        amount: 100,
        recipientUserId: PAYEE,
        comment: marker,
        metadata: { note: marker },
      },
    });
    expect(ok.statusCode, ok.body).toBe(201);
    const refused = await t.call('POST', '/intents', {
      user: PAYER,
      body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 10_000_000, recipientUserId: PAYEE, comment: marker },
    });
    expect(refused.statusCode).toBe(422);
    expect(logLines.length).toBeGreaterThan(1);
    expect(logLines.join('\n')).not.toContain(marker);
  });
});
