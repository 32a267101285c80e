import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { balanceOf } from '../support/invariants.js';
import { createMerchant, createUser, topUp } from '../support/payments.js';

/**
 * Random sequences of HTTP operations (payments among a few users with overdrafts, top-ups,
 * withdrawals with their fee, replays and changed replays of earlier keys, invoices issued,
 * confirmed and canceled), run in small concurrent groups. After each sequence: no 5xx, every
 * answer one the interface allows for that operation, each account moved by exactly what the
 * successful answers say, and the invariant audit clean.
 */

const RUNS = 30;
const GROUPS_MAX = 12;
/** Requests sent at once: enough to race one payer against itself, small enough to stay readable. */
const GROUP_SIZE_MAX = 3;
const AMOUNT_MAX = 30_000;

/** User ids of this file only: the payer lock is database-wide on a shared PostgreSQL server. */
const USERS = [7101, 7102, 7103, 7104] as const;
const MERCHANT = 7107;
const MERCHANT_ACCOUNT = `merchant.${MERCHANT}.THB`;
const REVENUE = 'system.revenue.THB';
const NOSTRO = 'system.nostro.pspx.THB';
const wallet = (userId: number) => `user.${userId}.THB`;
const WATCHED = [...USERS.map(wallet), MERCHANT_ACCOUNT, REVENUE, NOSTRO];

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  for (const user of USERS) await createUser(t, user);
  await createMerchant(t, MERCHANT);
  for (const user of USERS) await topUp(t, user, 20_000);
});
afterAll(async () => t?.close());

// ---------------------------------------------------------------------------------------------
// Operations

const user = fc.integer({ min: 0, max: USERS.length - 1 });
const amount = fc.integer({ min: 1, max: AMOUNT_MAX });
type Op =
  | { kind: 'p2p'; from: number; to: number; amount: number }
  | { kind: 'topup'; user: number; amount: number }
  | { kind: 'withdraw'; user: number; amount: number }
  | { kind: 'replay'; target: number; change: boolean }
  | { kind: 'issue'; amount: number }
  | { kind: 'confirm'; invoice: number; payer: number }
  | { kind: 'cancel'; invoice: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('p2p' as const), from: user, to: user, amount }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('topup' as const), user, amount }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('withdraw' as const), user, amount }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('replay' as const), target: fc.nat({ max: 1000 }), change: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('issue' as const), amount }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('confirm' as const), invoice: fc.nat({ max: 1000 }), payer: user }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), invoice: fc.nat({ max: 1000 }) }) },
);
const groups = fc.array(fc.array(op, { minLength: 1, maxLength: GROUP_SIZE_MAX, size: 'max' }), {
  minLength: 1,
  maxLength: GROUPS_MAX,
  size: 'max',
});

// ---------------------------------------------------------------------------------------------
// Running them, with what each answer means for the balances

/** A POST /intents sent earlier: the targets of replays. */
interface Sent {
  readonly user: number;
  readonly body: Readonly<Record<string, unknown>>;
}

interface Run {
  readonly sent: Sent[];
  /** Per idempotency key, the request that was stored under it and its intent. */
  readonly stored: Map<string, { readonly body: Readonly<Record<string, unknown>>; readonly intentId: string }>;
  readonly invoices: Array<{ id: string; amount: number }>;
  /** Expected movement per account name, from the successful answers. */
  readonly moved: Map<string, bigint>;
}

const move = (run: Run, account: string, delta: bigint) => run.moved.set(account, (run.moved.get(account) ?? 0n) + delta);

function expectStatus(res: LightMyRequestResponse, allowed: readonly number[], what: string): void {
  expect(res.statusCode, `${what}: ${res.body}`).toBeLessThan(500);
  expect(allowed, `${what} answered ${res.statusCode}: ${res.body}`).toContain(res.statusCode);
}

async function postIntent(run: Run, userId: number, body: Record<string, unknown>): Promise<LightMyRequestResponse> {
  run.sent.push({ user: userId, body });
  const res = await t.call('POST', '/intents', { user: userId, body });
  if (res.statusCode === 201) run.stored.set(body.idempotencyKey as string, { body, intentId: res.json().intentId as string });
  return res;
}

/** The money a new (201) intent moved, read from its answer. */
function settle(run: Run, body: Readonly<Record<string, unknown>>, userId: number, res: LightMyRequestResponse): void {
  const answer = res.json() as { status: string; preFeeAmount: string; postFeeAmount: string };
  expect(answer.status, res.body).toBe('SETTLED');
  const value = BigInt(body.amount as number);
  const preFee = BigInt(answer.preFeeAmount);
  expect(answer.postFeeAmount).toBe('0');
  switch (body.operationType) {
    case 'P2P_TRANSFER':
      move(run, wallet(userId), -value - preFee);
      move(run, wallet(body.recipientUserId as number), value);
      break;
    case 'QP_TOPUP':
      move(run, NOSTRO, -value - preFee);
      move(run, wallet(userId), value);
      break;
    case 'WITHDRAWAL':
      move(run, wallet(userId), -value - preFee);
      move(run, NOSTRO, value);
      break;
    default:
      throw new Error(`unexpected operation ${String(body.operationType)}`);
  }
  move(run, REVENUE, preFee);
}

const NEW_INTENT_ANSWERS = [201, 409, 422];

async function newIntent(run: Run, userId: number, body: Record<string, unknown>, what: string): Promise<void> {
  const res = await postIntent(run, userId, body);
  expectStatus(res, NEW_INTENT_ANSWERS, what);
  if (res.statusCode === 201) settle(run, body, userId, res);
}

/**
 * docs/rules.md R14: a stored intent answers an honest replay with itself (200) and a changed one with 409.
 * A request that was refused stored nothing, so its key is free and the replay is a new request
 * (which a concurrent replay of the same key may have just stored: then 200 or 409 too).
 */
async function replay(run: Run, target: Sent, change: boolean): Promise<void> {
  const body = change ? { ...target.body, amount: (target.body.amount as number) + 1 } : target.body;
  const stored = run.stored.get(body.idempotencyKey as string);
  const res = await postIntent(run, target.user, body);
  if (stored !== undefined) {
    const honest = JSON.stringify(stored.body) === JSON.stringify(body);
    expectStatus(res, honest ? [200] : [409], `replay (honest: ${honest}) of a stored intent`);
    if (res.statusCode === 200) expect(res.json().intentId).toBe(stored.intentId);
    return;
  }
  expectStatus(res, [200, ...NEW_INTENT_ANSWERS], 'replay of a refused request');
  if (res.statusCode === 201) settle(run, body, target.user, res);
}

async function confirm(run: Run, invoice: { id: string; amount: number }, payer: number): Promise<void> {
  const res = await t.call('POST', `/intents/${invoice.id}/confirm`, {
    user: payer,
    body: { payerLedgerAccountId: ledgerAccountId(wallet(payer)), payerUserId: payer, idempotencyKey: randomUUID() },
  });
  // 409: ALREADY_PROCESSED (settled, failed or canceled before), or the payer's lock is taken.
  expectStatus(res, [200, 409], 'confirm');
  if (res.statusCode === 200 && res.json().status === 'SETTLED') {
    // The demo config has no invoice fee rules: the merchant receives the amount.
    move(run, wallet(payer), -BigInt(invoice.amount));
    move(run, MERCHANT_ACCOUNT, BigInt(invoice.amount));
  } else if (res.statusCode === 200) {
    expect(res.json().status, res.body).toBe('FAILED');
  }
}

/** Invoices of earlier groups only, so that a confirm or cancel never races its own issue. */
async function runOp(run: Run, next: Op, invoicesBefore: number, sentBefore: number): Promise<void> {
  switch (next.kind) {
    case 'p2p': {
      const to = next.from === next.to ? (next.to + 1) % USERS.length : next.to;
      const body = { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: next.amount, recipientUserId: USERS[to] };
      return newIntent(run, USERS[next.from] ?? 0, body, 'P2P_TRANSFER');
    }
    case 'topup':
      return newIntent(
        run,
        USERS[next.user] ?? 0,
        { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: next.amount },
        'QP_TOPUP',
      );
    case 'withdraw': {
      const body = { idempotencyKey: randomUUID(), operationType: 'WITHDRAWAL', amount: next.amount, externalRef: `prop-${randomUUID()}` };
      return newIntent(run, USERS[next.user] ?? 0, body, 'WITHDRAWAL');
    }
    case 'replay': {
      const target = sentBefore === 0 ? undefined : run.sent[next.target % sentBefore];
      return target === undefined ? undefined : replay(run, target, next.change);
    }
    case 'issue': {
      const body = {
        idempotencyKey: randomUUID(),
        operationType: 'INVOICE_PAYMENT',
        amount: next.amount,
        toLedgerAccountId: ledgerAccountId(MERCHANT_ACCOUNT),
      };
      const res = await t.call('POST', '/intents', { user: MERCHANT, body });
      expectStatus(res, [201], 'invoice issue');
      run.invoices.push({ id: res.json().intentId as string, amount: next.amount });
      return;
    }
    case 'confirm': {
      const invoice = invoicesBefore === 0 ? undefined : run.invoices[next.invoice % invoicesBefore];
      return invoice === undefined ? undefined : confirm(run, invoice, USERS[next.payer] ?? 0);
    }
    case 'cancel': {
      const invoice = invoicesBefore === 0 ? undefined : run.invoices[next.invoice % invoicesBefore];
      if (invoice === undefined) return;
      const res = await t.call('POST', `/intents/${invoice.id}/cancel`, { user: MERCHANT, body: { reason: 'property test' } });
      expectStatus(res, [200, 409], 'cancel');
      return;
    }
    default: {
      const never: never = next;
      throw new Error(`unknown op ${JSON.stringify(never)}`);
    }
  }
}

async function balancesOf(names: readonly string[]): Promise<Map<string, bigint>> {
  return new Map(await Promise.all(names.map(async (name) => [name, await balanceOf(t.db, name)] as const)));
}

describe('random payment sequences over HTTP keep every invariant', () => {
  it(`no 5xx, balances move by exactly the successful answers, audit clean (${RUNS} runs of up to ${GROUPS_MAX} concurrent groups)`, async () => {
    await fc.assert(
      fc.asyncProperty(groups, async (sequence) => {
        const run: Run = { sent: [], stored: new Map(), invoices: [], moved: new Map() };
        const before = await balancesOf(WATCHED);
        for (const group of sequence) {
          const invoicesBefore = run.invoices.length;
          const sentBefore = run.sent.length;
          await Promise.all(group.map((next) => runOp(run, next, invoicesBefore, sentBefore)));
        }
        const after = await balancesOf(WATCHED);
        const actual = Object.fromEntries(WATCHED.map((name) => [name, (after.get(name) ?? 0n) - (before.get(name) ?? 0n)]));
        const expected = Object.fromEntries(WATCHED.map((name) => [name, run.moved.get(name) ?? 0n]));
        expect(actual).toEqual(expected);
        const audit = await runAudit(t.db);
        expect(audit.violations.map(formatViolation)).toEqual([]);
      }),
      { numRuns: RUNS },
    );
  });
});
