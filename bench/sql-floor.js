// The database floor: the writes of settled P2P intents, issued straight to PostgreSQL by several
// connections without HTTP, with the very statements the server sends (dist/ modules: the
// group-commit transaction of intent-commit.js, which guards and inserts the intents, applies
// their ledger transfers and appends their events and history).
// `batch` (default 1): intents per transaction; 1 is one settled intent per transaction, the
// plain floor, larger is what group commit can reach on this machine.
// `--with-reads` adds the server's reads per intent (config version, accounts, fee accounts).
// node bench/sql-floor.js '<json options>'  → one JSON line on stdout.
import { createHash, randomUUID } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { performance } from 'node:perf_hooks';
import { openDatabase } from '../dist/adapters/database.js';
import { findAccountsByName } from '../dist/domain/accounts.js';
import { historyRows } from '../dist/domain/intents/create/create-intent.js';
import { commitBatch } from '../dist/domain/intents/commit/intent-commit.js';
import { reserveTransfer, settleTransfers } from '../dist/domain/intents/money/money-path.js';
import { limitChecks, loadLimitRules } from '../dist/domain/limits.js';
import { ledgerAccountId } from '../dist/ledger/account-id.js';
import { SqlLedger } from '../dist/ledger/sql-ledger.js';

/** @typedef {import('../dist/domain/intents/commit/intent-commit.js').IntentCommit} IntentCommit */
/** @typedef {import('../dist/domain/accounts.js').AccountRecord} AccountRecord */
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
 */
/**
 * What the run prints: its JSON line on stdout.
 * @typedef {{ withReads: boolean, concurrency: number, batch: number, durationS: number, ok: number, failed: number, throughputPerS: number }} SqlFloorResult
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
} = options;
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

/** @param {ReadonlyArray<readonly [payer: number, recipient: number]>} payers */
async function settleBatch(payers) {
  /** @type {IntentCommit[]} */
  const items = [];
  for (const [payer, recipient] of payers) items.push(await commitOf(payer, recipient));
  const outcomes = await db.transaction((tx) => commitBatch(tx, ledger, items));
  const refused = outcomes.find((o) => o.kind !== 'stored' || o.failure !== null);
  if (refused !== undefined)
    throw new Error(`refused in the floor: ${JSON.stringify(refused, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`);
}

let ok = 0;
let failed = 0;
const start = performance.now();
const warmEnd = start + warmupS * 1000;
const end = warmEnd + durationS * 1000;
// Each worker pays from its own payers, so no two transactions hold one payer's lock.
const perWorker = Math.floor(userCount / concurrency);
await Promise.all(
  Array.from({ length: concurrency }, async (_, w) => {
    for (let i = 0; performance.now() < end; i += batch) {
      const pairs = Array.from({ length: batch }, (_, k) => {
        const payer = firstUser + w + concurrency * ((i + k) % perWorker);
        const recipient = firstUser + ((payer - firstUser + 1 + ((i + k) % (userCount - 1))) % userCount);
        return /** @type {const} */ ([payer, recipient]);
      });
      try {
        await settleBatch(pairs);
        if (performance.now() >= warmEnd) ok += batch;
      } catch (error) {
        failed += batch;
        if (failed <= 3 * batch) process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      }
    }
  }),
);
const elapsedS = (performance.now() - warmEnd) / 1000;
process.stdout.write(
  `${JSON.stringify({ withReads, concurrency, batch, durationS: Math.round(elapsedS * 10) / 10, ok, failed, throughputPerS: Math.round(ok / elapsedS) })}\n`,
);
await db.close();
