// The database floor: the writes of settled P2P intents, issued straight to PostgreSQL by several
// connections without HTTP, with the very statements the server sends (dist/ modules: the
// group-commit transaction of intent-commit.js, which guards and inserts the intents, applies
// their ledger transfers and appends their events and history).
// `batch` (default 1): intents per transaction; 1 is one settled intent per transaction, the
// plain floor, larger is what group commit can reach on this machine.
// `style` (default 'server'): 'plain' writes the same rows (the intents, their events and history,
// the ledger transfers and the balance updates) as plain INSERT and UPDATE statements, one per
// table per transaction, with no PL/pgSQL: what a hand-written research prototype pays, against
// which the server's own functions are judged.
// `--with-reads` adds the server's reads per intent (config version, accounts, fee accounts).
// `refusals` ({ share, payers: [first, count] }, style 'server' only): that share of the intents
// pays from payers who have no money (never funded, never paid), spread as bench/load.js spreads
// them; each must be refused INSUFFICIENT_FUNDS and every other one settle. What a refusal costs
// the database, without HTTP or the load generator sharing the machine.
// node bench/sql-floor.js '<json options>'  → one JSON line on stdout.
import { createHash, randomUUID } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { performance } from 'node:perf_hooks';
import { openDatabase } from '../dist/adapters/database.js';
import { findAccountsByName } from '../dist/domain/accounts/accounts.js';
import { historyRows } from '../dist/domain/intents/create/create-intent.js';
import { commitBatch } from '../dist/domain/intents/commit/intent-commit.js';
import { reserveTransfer, settleTransfers } from '../dist/domain/intents/money/money-path.js';
import { limitChecks, loadLimitRules } from '../dist/domain/rules/limits.js';
import { ledgerAccountId } from '../dist/ledger/account-id.js';
import { TransferFlags } from '../dist/ledger/ledger.js';
import { SqlLedger } from '../dist/ledger/sql-ledger.js';

/** @typedef {import('../dist/domain/intents/commit/intent-commit.js').IntentCommit} IntentCommit */
/** @typedef {import('../dist/domain/accounts/accounts.js').AccountRecord} AccountRecord */
/**
 * @typedef {object} SqlFloorOptions
 * @property {string} databaseUrl
 * @property {string} [dataDir]
 * @property {number} [concurrency]
 * @property {number} [durationS]
 * @property {number} [warmupS]
 * @property {[first: number, count: number]} users
 * @property {boolean} [withReads]
 * @property {number} [amount]
 * @property {number} [fee]
 * @property {number} [batch]
 * @property {'server' | 'plain'} [style]
 * @property {{ share: number, payers: [first: number, count: number] }} [refusals]
 */
/**
 * What the run prints: its JSON line on stdout (refused and refusedPerS with `refusals`).
 * @typedef {{ style: 'server' | 'plain', withReads: boolean, concurrency: number, batch: number, durationS: number, ok: number, failed: number, throughputPerS: number, refusedShare?: number, refused?: number, refusedPerS?: number }} SqlFloorResult
 */

/** @type {SqlFloorOptions} */
const options = JSON.parse(process.argv[2] ?? 'null');
const {
  databaseUrl,
  dataDir = '',
  concurrency = 16,
  durationS = 15,
  warmupS = 2,
  users,
  withReads = false,
  amount = 100,
  fee = 1,
  batch = 1,
  style = 'server',
  refusals,
} = options;
if (refusals !== undefined && style !== 'server') throw new Error('refusals: style server only');
const [firstUser, userCount] = users;
const db = await openDatabase(databaseUrl, dataDir);
const ledger = new SqlLedger();
const transit = ledgerAccountId('system.transit.INTERNAL_P2P.THB');
const revenueName = 'system.revenue.THB';
const revenue = ledgerAccountId(revenueName);
const rules = await loadLimitRules(db, 'P2P_TRANSFER', 'THB');
const TIMEOUT_S = 1800;
/** @type {IntentCommit['transitions']} */
const TRANSITIONS = [
  { from: null, to: 'CREATED' },
  { from: 'CREATED', to: 'VALIDATED' },
  { from: 'VALIDATED', to: 'AUTHORIZED' },
  { from: 'AUTHORIZED', to: 'SETTLED' },
];

/**
 * @param {number} payer
 * @param {number} recipient
 * @returns {Promise<IntentCommit>}
 */
async function commitOf(payer, recipient) {
  const fromName = `user.${payer}.THB`;
  const toName = `user.${recipient}.THB`;
  if (withReads) {
    await db.query('SELECT version FROM config_version');
    await findAccountsByName(db, [toName, fromName]);
    await findAccountsByName(db, [revenueName]);
  }
  const id = uuidv7();
  const now = new Date();
  /** @type {IntentCommit['intent']} */
  const draft = {
    id,
    idempotencyKey: randomUUID(),
    serviceId: 'bench-floor',
    requestFingerprint: createHash('sha256').update(id).digest('hex'),
    userId: payer,
    operationType: 'P2P_TRANSFER',
    channel: 'INTERNAL_P2P',
    fromAccountName: fromName,
    toAccountName: toName,
    fromUserId: payer,
    toUserId: recipient,
    externalRef: null,
    amount: BigInt(amount),
    preFeeAmount: BigInt(fee),
    postFeeAmount: 0n,
    feeSplits: [{ account: revenueName, amount: String(fee) }],
    currency: 'THB',
    status: 'SETTLED',
    pspState: null,
    failureReason: null,
    metadata: {},
    fromName: null,
    toName: null,
    comment: null,
    live: false,
    expiresAt: null,
    reservedAt: now,
    qrSignature: null,
    issuedByUserId: null,
    transferIds: [],
  };
  /** @type {import('../dist/domain/intents/money/money-path.js').MoneyPlan} */
  const plan = {
    intentId: id,
    operationType: 'P2P_TRANSFER',
    fromLedgerId: ledgerAccountId(fromName),
    toLedgerId: ledgerAccountId(toName),
    transitLedgerId: transit,
    amount: BigInt(amount),
    preFee: BigInt(fee),
    postFee: 0n,
    feeLegs: [{ ledgerAccountId: revenue, amount: BigInt(fee) }],
  };
  const transfers = [reserveTransfer(plan, TIMEOUT_S), ...settleTransfers(plan)];
  const checks = limitChecks(
    rules,
    { operationType: 'P2P_TRANSFER', amount: BigInt(amount), currency: 'THB', fromUserId: payer, toUserId: recipient },
    now,
  );
  // historyRows reads an account's name and user id only: the floor has no other column to give.
  const accounts = {
    from: /** @type {AccountRecord} */ ({ accountName: fromName, userId: payer }),
    to: /** @type {AccountRecord} */ ({ accountName: toName, userId: recipient }),
  };
  return {
    intent: { ...draft, transferIds: transfers.map((t) => t.id) },
    guard: { payerUserId: payer, checks },
    transfers,
    transitions: TRANSITIONS,
    history: historyRows(draft, accounts),
  };
}

/**
 * @param {ReadonlyArray<readonly [payer: number, recipient: number]>} payers
 * @returns {Promise<number>} the intents refused, as they should be, for funds
 */
async function settleBatch(payers) {
  /** @type {IntentCommit[]} */
  const items = [];
  for (const [payer, recipient] of payers) items.push(await commitOf(payer, recipient));
  if (style === 'plain') {
    await db.transaction((tx) => plainCommit(tx, items));
    return 0;
  }
  const { outcomes } = await db.transaction((tx) => commitBatch(tx, ledger, items));
  const unfunded = (/** @type {number} */ payer) =>
    refusals !== undefined && payer >= refusals.payers[0] && payer < refusals.payers[0] + refusals.payers[1];
  const wrong = outcomes.find((o, i) =>
    unfunded(/** @type {number} */ (payers[i]?.[0]))
      ? o.kind !== 'refused' || o.error.code !== 'INSUFFICIENT_FUNDS'
      : o.kind !== 'stored' || o.failure !== null,
  );
  if (wrong !== undefined)
    throw new Error(`unexpected in the floor: ${JSON.stringify(wrong, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`);
  return outcomes.filter((o) => o.kind === 'refused').length;
}

/** Shards of an unguarded account, as sql/ledger spreads a hot account's credits. */
const UNGUARDED_SHARDS = 8;
let plainBatches = 0;

/**
 * The research-style transaction: the rows the server writes for settled intents, as plain
 * INSERT and UPDATE statements over arrays. The reservation is written already posted and the
 * balances move by each account's net posted sum: the end state of the server's pending-then-post
 * chain, without its checks other than the payer's balance guard.
 * @param {import('../dist/adapters/database.js').Tx} tx
 * @param {readonly IntentCommit[]} items
 */
async function plainCommit(tx, items) {
  const intents = items.map((item) => item.intent);
  const column = (/** @type {(i: IntentCommit['intent']) => unknown} */ pick) => intents.map(pick);
  await tx.query(
    `INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel,
       from_account_name, to_account_name, from_user_id, to_user_id, amount, pre_fee_amount, post_fee_amount, fee_splits,
       currency, status, reserved_at, transfer_ids)
     SELECT id, key, 'bench-floor', fingerprint, payer, 'P2P_TRANSFER', 'INTERNAL_P2P', from_name, to_name, payer, payee,
       amount, pre_fee, 0, fee_splits, 'THB', 'SETTLED', now(), transfer_ids::uuid[]
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bigint[], $8::bigint[],
       $9::bigint[], $10::jsonb[], $11::text[])
       AS t(id, key, fingerprint, payer, from_name, to_name, payee, amount, pre_fee, fee_splits, transfer_ids)`,
    [
      column((i) => i.id),
      column((i) => i.idempotencyKey),
      column((i) => i.requestFingerprint),
      column((i) => i.userId),
      column((i) => i.fromAccountName),
      column((i) => i.toAccountName),
      column((i) => i.toUserId),
      column((i) => String(i.amount)),
      column((i) => String(i.preFeeAmount)),
      column((i) => JSON.stringify(i.feeSplits)),
      column((i) => `{${i.transferIds.join(',')}}`),
    ],
  );
  const events = items.flatMap((item) => item.transitions.map((t) => [item.intent.id, t.from, t.to]));
  await tx.query(
    `INSERT INTO intent_events (intent_id, status_from, status_to)
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[])`,
    [events.map((e) => e[0]), events.map((e) => e[1]), events.map((e) => e[2])],
  );
  const history = items.flatMap((item) => item.history.map((h) => ({ intentId: item.intent.id, ...h })));
  await tx.query(
    `INSERT INTO transactions (intent_id, account_name, user_id, operation_type, direction, amount, fee_amount, currency)
     SELECT intent_id, account_name, user_id, 'P2P_TRANSFER', direction, amount, fee_amount, 'THB'
     FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[])
       AS t(intent_id, account_name, user_id, direction, amount, fee_amount)`,
    [
      history.map((h) => h.intentId),
      history.map((h) => h.accountName),
      history.map((h) => h.userId),
      history.map((h) => h.direction),
      history.map((h) => String(h.amount)),
      history.map((h) => String(h.feeAmount)),
    ],
  );
  const rows = items.flatMap((item) => transferRows(item.transfers));
  await tx.query(
    `INSERT INTO ledger_transfers (id, debit_account_id, credit_account_id, amount, pending_id, timeout_s, ledger, code,
       flags, created_at, expires_at, pending_status)
     SELECT id, debit, credit, amount, pending_id, timeout_s, 1, code, flags, now(),
       CASE WHEN timeout_s > 0 THEN now() + make_interval(secs => timeout_s) END, pending_status
     FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::bigint[], $5::uuid[], $6::integer[], $7::integer[], $8::integer[],
       $9::text[]) AS t(id, debit, credit, amount, pending_id, timeout_s, code, flags, pending_status)`,
    [
      rows.map((r) => r.id),
      rows.map((r) => r.debit),
      rows.map((r) => r.credit),
      rows.map((r) => String(r.amount)),
      rows.map((r) => r.pendingId),
      rows.map((r) => r.timeoutS),
      rows.map((r) => r.code),
      rows.map((r) => r.flags),
      rows.map((r) => r.pendingStatus),
    ],
  );
  const moves = netPostedMoves(rows.filter((r) => r.moves));
  // One shard of each hot (unguarded) account per transaction, in turn, as the ledger spreads them.
  const shard = plainBatches++ % UNGUARDED_SHARDS;
  const updated = await tx.query(
    `UPDATE ledger_balances b SET debits_posted = b.debits_posted + m.debits, credits_posted = b.credits_posted + m.credits
     FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS m(account_id, debits, credits), ledger_accounts a
     WHERE a.id = m.account_id AND b.account_id = m.account_id
       AND b.shard = CASE WHEN a.flags & 2 <> 0 THEN 0 ELSE $4 END
       AND (a.flags & 2 = 0 OR b.credits_posted - b.debits_posted - b.debits_pending >= m.debits - m.credits)`,
    [moves.map((m) => m.accountId), moves.map((m) => String(m.debits)), moves.map((m) => String(m.credits)), shard],
  );
  if (updated.rowCount !== moves.length) throw new Error(`plain floor: ${moves.length - (updated.rowCount ?? 0)} balances refused`);
}

/**
 * The rows of one intent's transfers as stored once settled: the post takes its reservation's
 * accounts and amount, and the reservation is 'posted'. `moves`: the transfer counts in posted
 * balances (the reservation's amount moves through its post).
 * @param {readonly import('../dist/ledger/ledger.js').TransferInput[]} transfers
 */
function transferRows(transfers) {
  const byId = new Map(transfers.map((t) => [t.id, t]));
  return transfers.map((t) => {
    const reservation = t.pendingId === undefined ? t : byId.get(t.pendingId);
    if (reservation === undefined) throw new Error(`plain floor: ${t.id} posts a reservation outside its intent`);
    const pending = (t.flags & TransferFlags.pending) !== 0;
    return {
      id: t.id,
      debit: reservation.debitAccountId,
      credit: reservation.creditAccountId,
      amount: reservation.amount ?? 0n,
      pendingId: t.pendingId ?? null,
      timeoutS: t.timeoutS ?? 0,
      code: t.code,
      flags: t.flags,
      pendingStatus: pending ? 'posted' : null,
      moves: !pending,
    };
  });
}

/**
 * Each account's posted debits and credits over the transfers, in account order (the lock order).
 * @param {ReadonlyArray<{ debit: string | undefined, credit: string | undefined, amount: bigint }>} rows
 */
function netPostedMoves(rows) {
  /** @type {Map<string, { accountId: string, debits: bigint, credits: bigint }>} */
  const byAccount = new Map();
  /** @param {string | undefined} accountId */
  const entry = (accountId) => {
    if (accountId === undefined) throw new Error('plain floor: a transfer without its account');
    const found = byAccount.get(accountId) ?? { accountId, debits: 0n, credits: 0n };
    byAccount.set(accountId, found);
    return found;
  };
  for (const row of rows) {
    entry(row.debit).debits += row.amount;
    entry(row.credit).credits += row.amount;
  }
  return [...byAccount.values()].sort((a, b) => (a.accountId < b.accountId ? -1 : 1));
}

let ok = 0;
let failed = 0;
let refusedCount = 0;
const start = performance.now();
const warmEnd = start + warmupS * 1000;
const end = warmEnd + durationS * 1000;
// Each worker pays from its own payers, so no two transactions hold one payer's lock.
const perWorker = Math.floor(userCount / concurrency);
await Promise.all(
  Array.from({ length: concurrency }, async (_, w) => {
    for (let i = 0; performance.now() < end; i += batch) {
      const pairs = Array.from({ length: batch }, (_, k) => {
        const funded = firstUser + w + concurrency * ((i + k) % perWorker);
        const recipient = firstUser + ((funded - firstUser + 1 + ((i + k) % (userCount - 1))) % userCount);
        // The n-th intent is refused when ⌊(n + 1)·share⌋ > ⌊n·share⌋, as in bench/load.js.
        const n = i + k + w;
        const refused = refusals !== undefined && Math.floor((n + 1) * refusals.share) > Math.floor(n * refusals.share);
        const payer = refused ? refusals.payers[0] + ((w * batch + k) % refusals.payers[1]) : funded;
        return /** @type {const} */ ([payer, recipient]);
      });
      try {
        const refusedNow = await settleBatch(pairs);
        if (performance.now() >= warmEnd) {
          ok += batch - refusedNow;
          refusedCount += refusedNow;
        }
      } catch (error) {
        failed += batch;
        if (failed <= 3 * batch) process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      }
    }
  }),
);
const elapsedS = (performance.now() - warmEnd) / 1000;
process.stdout.write(
  `${JSON.stringify({
    style,
    withReads,
    concurrency,
    batch,
    durationS: Math.round(elapsedS * 10) / 10,
    ok,
    failed,
    throughputPerS: Math.round(ok / elapsedS),
    ...(refusals === undefined
      ? {}
      : { refusedShare: refusals.share, refused: refusedCount, refusedPerS: Math.round(refusedCount / elapsedS) }),
  })}\n`,
);
await db.close();
