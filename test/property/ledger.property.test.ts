import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { checkLedgerInvariants } from '../../src/ledger/invariants.js';
import {
  AccountFlags,
  type CreateAccountResult,
  type CreateTransferError,
  type CreateTransferResult,
  LEDGER_THB,
  type TransferInput,
  TransferFlags,
} from '../../src/ledger/ledger.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { openTestDatabase } from '../support/database.js';

/**
 * Random sequences of ledger operations through SqlLedger, each checked against a small
 * in-memory model of TigerBeetle's semantics (as sql/ledger/ documents them:
 * results in TigerBeetle's order, chains all-or-nothing, a chain member that already exists
 * unchanged does not break its chain) and against checkLedgerInvariants.
 *
 * Time: pending timeouts and clock steps are whole multiples of CLOCK_STEP_S, and a clock step
 * moves this run's expires_at back by that much. A test takes far less than CLOCK_STEP_S of real
 * time, so "expired" means the same in the model and in the database.
 */

const RUNS = 50;
const OPS_MAX = 30;
const POOL_SIZE = 6;
const INITIAL_ACCOUNTS_MIN = 3;
const CLOCK_STEP_S = 1000;
const SWEEP_BATCH_MAX = 500;
const CHAIN_MEMBERS_MAX = 4;
const BATCH_PARTS_MAX = 8;
/** What each guarded account gets from an unguarded one at the start: a few transfers' worth. */
const FUNDING = 600n;

const ledger = new SqlLedger();
/** Result codes seen over all runs: proof that the generators reach the interesting paths. */
const seen = new Map<string, number>();
let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => db?.close());

// ---------------------------------------------------------------------------------------------
// Operations

type NewOp = { kind: 'transfer'; debit: number; credit: number; amount: bigint; pending: boolean; timeoutSteps: number };
/** `target` picks among earlier reservations (`reservation`) or among all earlier events. */
type ResolveOp = { kind: 'post' | 'void'; target: number; reservation: boolean; amount: 'full' | 'partial' | 'over' | 'zero' };
type MemberOp = NewOp | ResolveOp;
type ChainOp = { kind: 'chain'; members: MemberOp[]; open: boolean };
type DuplicateOp = { kind: 'duplicate'; target: number; change: boolean };
/** One part of a batch of several: what a lone batch would hold. */
type PartOp = MemberOp | ChainOp | DuplicateOp;
type Op =
  | PartOp
  | { kind: 'batch'; parts: PartOp[] }
  | { kind: 'account'; index: number; guarded: boolean }
  | { kind: 'advance'; steps: number }
  | { kind: 'sweep' };

/** Mostly accounts that exist from the start; the last ones of the pool only after an `account` op. */
const accountIndex = fc.oneof(
  { weight: 9, arbitrary: fc.integer({ min: 0, max: INITIAL_ACCOUNTS_MIN - 1 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: POOL_SIZE - 1 }) },
);
const newOp: fc.Arbitrary<NewOp> = fc
  .record({
    kind: fc.constant('transfer' as const),
    debit: accountIndex,
    credit: accountIndex,
    amount: fc.oneof({ weight: 19, arbitrary: fc.bigInt({ min: 1n, max: 300n }) }, { weight: 1, arbitrary: fc.constant(0n) }),
    pending: fc.boolean(),
    timeoutSteps: fc.constantFrom(0, 1, 2),
    // Rarely, a timeout on a single-phase transfer (timeout_reserved_for_pending_transfer), or
    // one account on both sides (accounts_must_be_different).
    strayTimeout: fc.integer({ min: 0, max: 19 }).map((n) => n === 0),
    sameAccount: fc.integer({ min: 0, max: 19 }).map((n) => n === 0),
  })
  .map(({ strayTimeout, sameAccount, ...rest }) => ({
    ...rest,
    credit: rest.debit === rest.credit && !sameAccount ? (rest.debit + 1) % INITIAL_ACCOUNTS_MIN : rest.credit,
    timeoutSteps: rest.pending || strayTimeout ? rest.timeoutSteps : 0,
  }));
const resolveOp: fc.Arbitrary<ResolveOp> = fc.record({
  kind: fc.constantFrom('post' as const, 'void' as const),
  target: fc.nat({ max: 1000 }),
  reservation: fc.integer({ min: 0, max: 4 }).map((n) => n > 0),
  amount: fc.constantFrom('full' as const, 'full' as const, 'partial' as const, 'over' as const, 'zero' as const),
});
const memberOp: fc.Arbitrary<MemberOp> = fc.oneof(newOp, resolveOp);
const chainOp: fc.Arbitrary<ChainOp> = fc.record({
  kind: fc.constant('chain' as const),
  members: fc.array(memberOp, { minLength: 2, maxLength: CHAIN_MEMBERS_MAX }),
  open: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
});
const duplicateOp: fc.Arbitrary<DuplicateOp> = fc.record({
  kind: fc.constant('duplicate' as const),
  target: fc.nat({ max: 1000 }),
  change: fc.boolean(),
});
// In a batch of several, a chain stays closed unless it is the batch's last part; resolves and
// duplicates may name events earlier in the same batch.
const partOp: fc.Arbitrary<PartOp> = fc.oneof(
  { weight: 6, arbitrary: newOp },
  { weight: 5, arbitrary: resolveOp },
  { weight: 2, arbitrary: chainOp },
  { weight: 1, arbitrary: duplicateOp },
);
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: newOp },
  { weight: 5, arbitrary: resolveOp },
  { weight: 2, arbitrary: chainOp },
  { weight: 2, arbitrary: duplicateOp },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('batch' as const), parts: fc.array(partOp, { minLength: 2, maxLength: BATCH_PARTS_MAX }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('account' as const),
      index: fc.integer({ min: 0, max: POOL_SIZE - 1 }),
      guarded: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('advance' as const), steps: fc.constantFrom(1, 2) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'sweep' as const }) },
);
const scenario = fc.record({
  // These exist from the start (guarded or not); the rest of the pool only after an `account` op.
  initial: fc.array(fc.boolean(), { minLength: INITIAL_ACCOUNTS_MIN, maxLength: POOL_SIZE - 1 }),
  ops: fc.array(op, { minLength: 1, maxLength: OPS_MAX, size: 'max' }),
});

// ---------------------------------------------------------------------------------------------
// The model

interface ModelAccount {
  readonly flags: number;
  dp: bigint;
  dpo: bigint;
  cp: bigint;
  cpo: bigint;
}

interface ModelTransfer {
  readonly id: string;
  readonly debit: string;
  readonly credit: string;
  readonly amount: bigint;
  readonly pendingId: string | null;
  readonly timeoutS: number;
  readonly flags: number;
  status: 'pending' | 'posted' | 'voided' | 'expired' | null;
  readonly expiresAtS: number | null;
}

interface ModelState {
  accounts: Map<string, ModelAccount>;
  transfers: Map<string, ModelTransfer>;
  clockS: number;
}

const cloneState = (state: ModelState): ModelState => ({
  accounts: new Map([...state.accounts].map(([id, a]) => [id, { ...a }])),
  transfers: new Map([...state.transfers].map(([id, t]) => [id, { ...t }])),
  clockS: state.clockS,
});

const RESOLVING = TransferFlags.postPendingTransfer | TransferFlags.voidPendingTransfer;

function applyOne(state: ModelState, e: TransferInput): CreateTransferError | null {
  const existing = state.transfers.get(e.id);
  if (existing !== undefined) return compareStored(state, e, existing);
  const kinds = [TransferFlags.pending, TransferFlags.postPendingTransfer, TransferFlags.voidPendingTransfer].filter(
    (f) => (e.flags & f) !== 0,
  );
  if (kinds.length > 1) return 'flags_are_mutually_exclusive';
  return (e.flags & RESOLVING) !== 0 ? applyResolve(state, e) : applyNew(state, e);
}

function compareStored(state: ModelState, e: TransferInput, t: ModelTransfer): CreateTransferError {
  const resolves = (t.flags & RESOLVING) !== 0;
  if (e.flags !== t.flags) return 'exists_with_different_flags';
  if ((e.pendingId ?? null) !== t.pendingId) return 'exists_with_different_pending_id';
  if ((e.timeoutS ?? 0) !== t.timeoutS) return 'exists_with_different_timeout';
  if (e.debitAccountId !== t.debit && !(resolves && e.debitAccountId === undefined)) return 'exists_with_different_debit_account_id';
  if (e.creditAccountId !== t.credit && !(resolves && e.creditAccountId === undefined)) return 'exists_with_different_credit_account_id';
  let amount = e.amount;
  if ((t.flags & TransferFlags.postPendingTransfer) !== 0 && amount === undefined) {
    amount = t.pendingId === null ? undefined : state.transfers.get(t.pendingId)?.amount;
  } else if ((t.flags & TransferFlags.voidPendingTransfer) !== 0 && (amount ?? 0n) === 0n) {
    amount = t.amount;
  }
  return amount === t.amount ? 'exists' : 'exists_with_different_amount';
}

function applyNew(state: ModelState, e: TransferInput): CreateTransferError | null {
  const pending = (e.flags & TransferFlags.pending) !== 0;
  const amount = e.amount ?? 0n;
  const timeoutS = e.timeoutS ?? 0;
  if (e.debitAccountId === e.creditAccountId) return 'accounts_must_be_different';
  if (timeoutS !== 0 && !pending) return 'timeout_reserved_for_pending_transfer';
  if (amount === 0n) return 'amount_must_not_be_zero';
  const debit = state.accounts.get(e.debitAccountId ?? '');
  if (debit === undefined) return 'debit_account_not_found';
  const credit = state.accounts.get(e.creditAccountId ?? '');
  if (credit === undefined) return 'credit_account_not_found';
  if ((debit.flags & AccountFlags.debitsMustNotExceedCredits) !== 0 && debit.dp + debit.dpo + amount > debit.cpo) return 'exceeds_credits';
  if (pending) {
    debit.dp += amount;
    credit.cp += amount;
  } else {
    debit.dpo += amount;
    credit.cpo += amount;
  }
  state.transfers.set(e.id, {
    id: e.id,
    debit: e.debitAccountId ?? '',
    credit: e.creditAccountId ?? '',
    amount,
    pendingId: null,
    timeoutS,
    flags: e.flags,
    status: pending ? 'pending' : null,
    expiresAtS: timeoutS > 0 ? state.clockS + timeoutS : null,
  });
  return null;
}

function applyResolve(state: ModelState, e: TransferInput): CreateTransferError | null {
  const post = (e.flags & TransferFlags.postPendingTransfer) !== 0;
  if (post && e.amount === 0n) return 'amount_must_not_be_zero';
  const pending = state.transfers.get(e.pendingId ?? '');
  if (pending === undefined) return 'pending_transfer_not_found';
  if ((pending.flags & TransferFlags.pending) === 0) return 'pending_transfer_not_pending';
  if (e.amount !== undefined && e.amount > pending.amount) return 'exceeds_pending_transfer_amount';
  if (pending.status === 'posted') return 'pending_transfer_already_posted';
  if (pending.status === 'voided') return 'pending_transfer_already_voided';
  if (pending.status === 'expired') return 'pending_transfer_expired';
  if (isDue(state, pending)) {
    expire(state, pending);
    return 'pending_transfer_expired';
  }
  const posted = post ? (e.amount ?? pending.amount) : pending.amount;
  release(state, pending);
  if (post) {
    bump(state, pending.debit, 'dpo', posted);
    bump(state, pending.credit, 'cpo', posted);
  }
  pending.status = post ? 'posted' : 'voided';
  state.transfers.set(e.id, {
    id: e.id,
    debit: pending.debit,
    credit: pending.credit,
    amount: posted,
    pendingId: pending.id,
    timeoutS: 0,
    flags: e.flags,
    status: null,
    expiresAtS: null,
  });
  return null;
}

const isDue = (state: ModelState, t: ModelTransfer) => t.status === 'pending' && t.expiresAtS !== null && t.expiresAtS <= state.clockS;

function bump(state: ModelState, accountId: string, field: 'dp' | 'dpo' | 'cp' | 'cpo', amount: bigint) {
  const account = state.accounts.get(accountId);
  if (account === undefined) throw new Error(`model: account ${accountId} vanished`);
  account[field] += amount;
}

function release(state: ModelState, pending: ModelTransfer) {
  bump(state, pending.debit, 'dp', -pending.amount);
  bump(state, pending.credit, 'cp', -pending.amount);
}

function expire(state: ModelState, pending: ModelTransfer) {
  release(state, pending);
  pending.status = 'expired';
}

/** A batch as ledger_run_batch applies it: single events alone, chains all-or-nothing. */
function applyBatch(state: ModelState, batch: readonly TransferInput[]): { state: ModelState; results: CreateTransferResult[] } {
  const results: CreateTransferResult[] = [];
  let current = state;
  let start = 0;
  while (start < batch.length) {
    let end = start;
    while (end < batch.length - 1 && ((batch[end]?.flags ?? 0) & TransferFlags.linked) !== 0) end += 1;
    if (((batch[end]?.flags ?? 0) & TransferFlags.linked) !== 0) {
      for (let index = start; index <= end; index += 1) {
        results.push({ index, result: index === end ? 'linked_event_chain_open' : 'linked_event_failed' });
      }
      break;
    }
    current = end === start ? applySingle(current, batch, start, results) : applyChain(current, batch, start, end, results);
    start = end + 1;
  }
  return { state: current, results };
}

function applySingle(state: ModelState, batch: readonly TransferInput[], index: number, results: CreateTransferResult[]): ModelState {
  const event = batch[index];
  if (event === undefined) throw new Error('model: batch index out of range');
  const reason = applyOne(state, event);
  if (reason !== null) results.push({ index, result: reason });
  return state;
}

function applyChain(
  state: ModelState,
  batch: readonly TransferInput[],
  start: number,
  end: number,
  results: CreateTransferResult[],
): ModelState {
  const trial = cloneState(state);
  const chain: CreateTransferResult[] = [];
  for (let index = start; index <= end; index += 1) {
    const event = batch[index];
    if (event === undefined) throw new Error('model: batch index out of range');
    const reason = applyOne(trial, event);
    if (reason === 'exists') {
      chain.push({ index, result: reason });
    } else if (reason !== null) {
      for (let other = start; other <= end; other += 1)
        results.push({ index: other, result: other === index ? reason : 'linked_event_failed' });
      // The rollback undid the expiry that found the reservation timed out; it is redone outside the chain.
      const pending = reason === 'pending_transfer_expired' ? state.transfers.get(event.pendingId ?? '') : undefined;
      if (pending !== undefined && isDue(state, pending)) expire(state, pending);
      return state;
    }
  }
  results.push(...chain);
  return trial;
}

// ---------------------------------------------------------------------------------------------
// Running a scenario against the database and the model side by side

interface Run {
  readonly pool: readonly string[];
  state: ModelState;
  /** Every transfer event submitted, in order: targets of posts, voids and duplicates. */
  readonly submitted: TransferInput[];
}

function eventOf(run: Run, member: MemberOp): TransferInput {
  if (member.kind === 'transfer') {
    return {
      id: randomUUID(),
      debitAccountId: run.pool[member.debit] ?? '',
      creditAccountId: run.pool[member.credit] ?? '',
      amount: member.amount,
      timeoutS: member.timeoutSteps * CLOCK_STEP_S,
      ledger: LEDGER_THB,
      code: 1,
      flags: member.pending ? TransferFlags.pending : TransferFlags.none,
    };
  }
  const candidates = member.reservation ? run.submitted.filter((e) => (e.flags & TransferFlags.pending) !== 0) : run.submitted;
  const target = candidates.length === 0 ? undefined : candidates[member.target % candidates.length];
  const reserved = target?.amount ?? 1n;
  const amount = { full: undefined, partial: reserved > 1n ? reserved - 1n : undefined, over: reserved + 1n, zero: 0n }[member.amount];
  return {
    id: randomUUID(),
    pendingId: target?.id ?? randomUUID(),
    ...(member.kind === 'post' && amount !== undefined ? { amount } : {}),
    ledger: LEDGER_THB,
    code: 1,
    flags: member.kind === 'post' ? TransferFlags.postPendingTransfer : TransferFlags.voidPendingTransfer,
  };
}

async function submit(run: Run, batch: TransferInput[]): Promise<void> {
  run.submitted.push(...batch);
  const expected = applyBatch(run.state, batch);
  run.state = expected.state;
  const actual = await ledger.createTransfers(db, batch);
  for (const { result } of actual) seen.set(result, (seen.get(result) ?? 0) + 1);
  seen.set('applied', (seen.get('applied') ?? 0) + batch.length - actual.length);
  expect(
    actual,
    JSON.stringify(batch, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
  ).toEqual(expected.results);
}

async function createAccount(run: Run, index: number, guarded: boolean): Promise<void> {
  const id = run.pool[index] ?? '';
  const flags = guarded ? AccountFlags.debitsMustNotExceedCredits : AccountFlags.none;
  const existing = run.state.accounts.get(id);
  const expected: CreateAccountResult[] =
    existing === undefined ? [] : [{ index: 0, result: existing.flags === flags ? 'exists' : 'exists_with_different_flags' }];
  if (existing === undefined) run.state.accounts.set(id, { flags, dp: 0n, dpo: 0n, cp: 0n, cpo: 0n });
  expect(await ledger.createAccounts(db, [{ id, ledger: LEDGER_THB, code: 1, flags }])).toEqual(expected);
}

/** What the sweeper releases is exactly what the model says is due; other runs' transfers are not ours to check. */
async function sweep(run: Run): Promise<void> {
  const swept = new Set<string>();
  for (let round = 0; round < 100; round += 1) {
    const ids = await ledger.expirePendingTransfers(db, SWEEP_BATCH_MAX);
    for (const id of ids) swept.add(id);
    if (ids.length < SWEEP_BATCH_MAX) break;
  }
  const due = [...run.state.transfers.values()].filter((t) => isDue(run.state, t));
  for (const t of due) expire(run.state, t);
  const ours = [...swept].filter((id) => run.state.transfers.has(id));
  expect(ours.sort()).toEqual(due.map((t) => t.id).sort());
}

/**
 * The events of one part of a batch, each added to `run.submitted` as it is made, so that later
 * members and parts may resolve or repeat it; the caller takes them off again before submitting.
 * `last`: the part ends its batch, so an open chain stays open.
 */
function partEvents(run: Run, part: PartOp, last: boolean): TransferInput[] {
  switch (part.kind) {
    case 'transfer':
    case 'post':
    case 'void': {
      const event = eventOf(run, part);
      run.submitted.push(event);
      return [event];
    }
    case 'chain': {
      const open = part.open && last;
      const events = part.members.map((member, i) => {
        const event = eventOf(run, member);
        const linked = { ...event, flags: event.flags | (i < part.members.length - 1 || open ? TransferFlags.linked : 0) };
        run.submitted.push(linked);
        return linked;
      });
      return events;
    }
    case 'duplicate': {
      const earlier = run.submitted[part.target % Math.max(run.submitted.length, 1)];
      if (earlier === undefined) return [];
      // Alone: a chain member's linked flag would join it to whatever follows.
      const again = {
        ...earlier,
        flags: earlier.flags & ~TransferFlags.linked,
        ...(part.change ? { amount: (earlier.amount ?? 0n) + 1n } : {}),
      };
      run.submitted.push(again);
      return [again];
    }
    default: {
      const never: never = part;
      throw new Error(`unknown part ${JSON.stringify(never)}`);
    }
  }
}

async function submitParts(run: Run, parts: readonly PartOp[]): Promise<void> {
  const before = run.submitted.length;
  const batch = parts.flatMap((part, i) => partEvents(run, part, i === parts.length - 1));
  run.submitted.splice(before);
  if (batch.length > 0) await submit(run, batch);
}

async function apply(run: Run, next: Op): Promise<void> {
  switch (next.kind) {
    case 'transfer':
    case 'post':
    case 'void':
    case 'chain':
    case 'duplicate':
      return submitParts(run, [next]);
    case 'batch':
      return submitParts(run, next.parts);
    case 'account':
      return createAccount(run, next.index, next.guarded);
    case 'advance': {
      const seconds = next.steps * CLOCK_STEP_S;
      run.state.clockS += seconds;
      await db.query(
        `UPDATE ledger_transfers SET expires_at = expires_at - make_interval(secs => $1)
          WHERE expires_at IS NOT NULL AND debit_account_id = ANY ($2::uuid[])`,
        [seconds, [...run.pool]],
      );
      return;
    }
    case 'sweep':
      return sweep(run);
    default: {
      const never: never = next;
      throw new Error(`unknown op ${JSON.stringify(never)}`);
    }
  }
}

async function expectDatabaseMatchesModel(run: Run): Promise<void> {
  const ids = [...run.state.accounts.keys()];
  const accounts = await ledger.lookupAccounts(db, ids);
  const actual = Object.fromEntries(accounts.map((a) => [a.id, [a.debitsPending, a.debitsPosted, a.creditsPending, a.creditsPosted]]));
  const expected = Object.fromEntries([...run.state.accounts].map(([id, a]) => [id, [a.dp, a.dpo, a.cp, a.cpo]]));
  expect(actual).toEqual(expected);
  const transfers = await ledger.lookupTransfers(db, [...run.state.transfers.keys()]);
  expect(Object.fromEntries(transfers.map((t) => [t.id, [t.amount, t.pendingStatus]]))).toEqual(
    Object.fromEntries([...run.state.transfers.values()].map((t) => [t.id, [t.amount, t.status]])),
  );
  expect(await checkLedgerInvariants(db)).toEqual([]);
}

describe('the SQL ledger behaves as the TigerBeetle model on random operation sequences', () => {
  it(`agrees on every result code, balance and pending status (${RUNS} runs of up to ${OPS_MAX} operations)`, async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ initial, ops }) => {
        const run: Run = {
          pool: Array.from({ length: POOL_SIZE }, () => randomUUID()),
          state: { accounts: new Map(), transfers: new Map(), clockS: 0 },
          submitted: [],
        };
        for (const [index, guarded] of initial.entries()) await createAccount(run, index, guarded);
        // Unguarded accounts fund the guarded ones, so that guarded debits are not all refused.
        const source = initial.findIndex((guarded) => !guarded);
        if (source >= 0) {
          for (const [index, guarded] of initial.entries()) {
            if (guarded)
              await submit(run, [
                eventOf(run, { kind: 'transfer', debit: source, credit: index, amount: FUNDING, pending: false, timeoutSteps: 0 }),
              ]);
          }
        }
        for (const next of ops) await apply(run, next);
        // checkLedgerInvariants reports expired reservations that still wait for the sweeper.
        await sweep(run);
        await expectDatabaseMatchesModel(run);
      }),
      { numRuns: RUNS },
    );
    // Codes that every batch of runs reaches many times over; rarer ones are not asserted, so this never flakes.
    for (const code of ['applied', 'exceeds_credits', 'linked_event_failed', 'exists', 'pending_transfer_not_found']) {
      expect(seen.get(code) ?? 0, `${code} in ${JSON.stringify([...seen])}`).toBeGreaterThan(0);
    }
  });
});

describe('a batch whose transfers are refused in places agrees with the model, refusal by refusal', () => {
  // The pool: an unguarded source and transit, two funded wallets, one never funded.
  const [source, walletA, walletB, unfunded, transit] = [0, 1, 2, 3, 4];
  const pay = (run: Run, debit: number, credit: number, amount: bigint, pending = false, timeoutSteps = 0): TransferInput =>
    eventOf(run, { kind: 'transfer', debit, credit, amount, pending, timeoutSteps });
  const resolve = (kind: 'post' | 'void', reservation: TransferInput, amount?: bigint): TransferInput => ({
    id: randomUUID(),
    pendingId: reservation.id,
    ...(amount === undefined ? {} : { amount }),
    ledger: LEDGER_THB,
    code: 1,
    flags: kind === 'post' ? TransferFlags.postPendingTransfer : TransferFlags.voidPendingTransfer,
  });
  /** A case that submits one batch of single-phase transfers, [debit, credit, amount] each, in order. */
  const batchOf =
    (legs: ReadonlyArray<readonly [number, number, bigint]>) =>
    (run: Run): Promise<void> =>
      submit(
        run,
        legs.map(([debit, credit, amount]) => pay(run, debit, credit, amount)),
      );
  /** Every event but the last linked to the next; `open`: the last too. */
  const linked = (events: readonly TransferInput[], open = false): TransferInput[] =>
    events.map((e, i) => (i < events.length - 1 || open ? { ...e, flags: e.flags | TransferFlags.linked } : e));
  /** One payment as group commit sends it: the reservation, then its settlement chain. */
  const payment = (run: Run, payer: number, payee: number, amount: bigint): TransferInput[] => {
    const reservation = pay(run, payer, transit, amount, true);
    return [reservation, ...linked([resolve('post', reservation), pay(run, transit, payee, amount - 1n), pay(run, transit, source, 1n)])];
  };

  async function freshRun(): Promise<Run> {
    const run: Run = {
      pool: Array.from({ length: POOL_SIZE }, () => randomUUID()),
      state: { accounts: new Map(), transfers: new Map(), clockS: 0 },
      submitted: [],
    };
    for (const index of [source, walletA, walletB, unfunded, transit])
      await createAccount(run, index, index !== source && index !== transit);
    await submit(run, [pay(run, source, walletA, FUNDING), pay(run, source, walletB, FUNDING)]);
    return run;
  }

  const cases: ReadonlyArray<[string, (run: Run) => Promise<void>]> = [
    [
      'in the middle',
      batchOf([
        [walletA, walletB, 10n],
        [unfunded, walletB, 50n],
        [walletA, walletB, 20n],
      ]),
    ],
    [
      'at the start',
      batchOf([
        [unfunded, walletB, 50n],
        [walletA, walletB, 10n],
        [walletB, walletA, 5n],
      ]),
    ],
    [
      'at the end',
      batchOf([
        [walletA, walletB, 10n],
        [walletB, walletA, 5n],
        [unfunded, walletB, 50n],
      ]),
    ],
    [
      'inside a linked chain',
      (run) =>
        submit(run, [
          pay(run, walletA, walletB, 10n),
          ...linked([pay(run, walletA, walletB, 10n), pay(run, unfunded, walletB, 5n), pay(run, walletB, walletA, 1n)]),
          pay(run, walletB, walletA, 10n),
        ]),
    ],
    [
      'several in a row',
      batchOf([
        [unfunded, walletB, 1n],
        [unfunded, walletA, 2n],
        [walletA, walletB, 10n],
        [unfunded, walletB, 3n],
        [unfunded, walletA, 4n],
        [walletA, walletB, FUNDING * 4n],
        [walletB, walletA, 1n],
      ]),
    ],
    [
      'a transfer that fits only because an earlier one in the batch credited its account',
      batchOf([
        [unfunded, walletB, 5n],
        [walletA, unfunded, 30n],
        [unfunded, walletB, 25n],
        [unfunded, walletB, 10n],
        [unfunded, walletB, 5n],
        [unfunded, walletB, 1n],
      ]),
    ],
    [
      'a post of a reservation made earlier in the batch, a refusal between them',
      (run) => {
        const reservation = pay(run, walletA, transit, 100n, true);
        const refused = pay(run, unfunded, walletB, 1n, true);
        return submit(run, [
          reservation,
          refused,
          resolve('post', refused),
          resolve('post', reservation, 60n),
          pay(run, transit, unfunded, 60n),
          pay(run, unfunded, walletB, 60n),
        ]);
      },
    ],
    [
      'payments with refused reservations, more than the re-plans allowed',
      (run) =>
        submit(
          run,
          [
            walletA,
            unfunded,
            walletB,
            unfunded,
            walletA,
            unfunded,
            unfunded,
            unfunded,
            walletB,
            unfunded,
            walletA,
            unfunded,
            walletB,
          ].flatMap((payer, i) => payment(run, payer, payer === walletA ? walletB : walletA, BigInt(10 + i))),
        ),
    ],
    [
      'an id twice in one batch, then the same batch again',
      async (run) => {
        const once = pay(run, walletA, walletB, 7n);
        const batch = [once, pay(run, unfunded, walletB, 1n), { ...once }, { ...once, amount: 8n }, pay(run, walletB, walletA, 3n)];
        await submit(run, batch);
        await submit(run, batch);
      },
    ],
    [
      'a reservation resolved twice in one batch',
      (run) => {
        const reservation = pay(run, walletA, transit, 50n, true);
        return submit(run, [
          reservation,
          resolve('post', reservation, 20n),
          resolve('void', reservation),
          pay(run, walletA, walletB, 1n),
          resolve('void', reservation),
        ]);
      },
    ],
    [
      'a reservation in a chain that fails, posted later in the batch',
      (run) => {
        const reservation = pay(run, walletA, transit, 10n, true);
        return submit(run, [
          ...linked([reservation, pay(run, unfunded, walletB, 1n)]),
          resolve('post', reservation),
          pay(run, walletA, walletB, 1n),
        ]);
      },
    ],
    [
      'a chain left open after a refusal',
      (run) =>
        submit(run, [
          pay(run, unfunded, walletB, 1n),
          pay(run, walletA, walletB, 1n),
          ...linked([pay(run, walletA, walletB, 1n), pay(run, walletB, walletA, 1n)], true),
        ]),
    ],
    [
      'a reservation expired in the middle of a batch',
      async (run) => {
        const reservation = pay(run, walletA, transit, 40n, true, 1);
        await submit(run, [reservation]);
        await apply(run, { kind: 'advance', steps: 1 });
        await submit(run, [
          pay(run, walletA, walletB, 1n),
          ...linked([resolve('post', reservation), pay(run, transit, walletB, 40n)]),
          pay(run, walletA, walletB, FUNDING),
          pay(run, walletA, walletB, 2n),
        ]);
      },
    ],
  ];

  it.each(cases)('refused %s', async (_name, scenario) => {
    const run = await freshRun();
    await scenario(run);
    await sweep(run);
    await expectDatabaseMatchesModel(run);
  });
});
