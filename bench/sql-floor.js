// The database floor: the writes of one settled P2P intent, issued straight to PostgreSQL by
// several connections without HTTP, with the very statements the server sends (dist/ modules:
// intent + lock + limits, one ledger batch, events + history, in one transaction).
// `--with-reads` adds the server's reads per intent (config version, accounts, fee accounts).
// node bench/sql-floor.js '<json options>'  → one JSON line on stdout.
import { createHash, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { openDatabase } from '../dist/adapters/database.js';
import { findAccountsByName } from '../dist/domain/accounts.js';
import { historyRows } from '../dist/domain/intents/create-intent.js';
import { closeIntent, openIntent } from '../dist/domain/intents/intent-commit.js';
import { reserveTransfer, settleTransfers } from '../dist/domain/intents/money-path.js';
import { limitChecks, loadLimitRules } from '../dist/domain/limits.js';
import { ledgerAccountId } from '../dist/ledger/account-id.js';
import { SqlLedger } from '../dist/ledger/sql-ledger.js';

const { databaseUrl, concurrency = 16, durationS = 15, warmupS = 2, users, withReads = false, amount = 100, fee = 1 } = JSON.parse(process.argv[2]);
const [firstUser, userCount] = users;
const db = await openDatabase(databaseUrl, '');
const ledger = new SqlLedger();
const transit = ledgerAccountId('system.transit.INTERNAL_P2P.THB');
const revenueName = 'system.revenue.THB';
const revenue = ledgerAccountId(revenueName);
const rules = await loadLimitRules(db, 'P2P_TRANSFER', 'THB');
const TIMEOUT_S = 1800;

async function settleOne(payer, recipient) {
  const fromName = `user.${payer}.THB`;
  const toName = `user.${recipient}.THB`;
  if (withReads) {
    await db.query('SELECT version FROM config_version');
    await findAccountsByName(db, [toName, fromName]);
    await findAccountsByName(db, [revenueName]);
  }
  const id = randomUUID();
  const now = new Date();
  const draft = {
    id, idempotencyKey: randomUUID(), serviceId: 'bench-floor', requestFingerprint: createHash('sha256').update(id).digest('hex'),
    userId: payer, operationType: 'P2P_TRANSFER', channel: 'INTERNAL_P2P', fromAccountName: fromName, toAccountName: toName,
    fromUserId: payer, toUserId: recipient, externalRef: null, amount: BigInt(amount), preFeeAmount: BigInt(fee), postFeeAmount: 0n,
    feeSplits: [{ account: revenueName, amount: String(fee) }], currency: 'THB', status: 'SETTLED', pspState: null, failureReason: null,
    metadata: {}, fromName: null, toName: null, comment: null, live: false, expiresAt: null, reservedAt: now, qrSignature: null,
    issuedByUserId: null, transferIds: [],
  };
  const plan = {
    intentId: id, operationType: 'P2P_TRANSFER', fromLedgerId: ledgerAccountId(fromName), toLedgerId: ledgerAccountId(toName),
    transitLedgerId: transit, amount: BigInt(amount), preFee: BigInt(fee), postFee: 0n, feeLegs: [{ ledgerAccountId: revenue, amount: BigInt(fee) }],
  };
  const transfers = [reserveTransfer(plan, TIMEOUT_S), ...settleTransfers(plan)];
  const intent = { ...draft, transferIds: transfers.map((t) => t.id) };
  await db.transaction(async (tx) => {
    const checks = limitChecks(rules, { operationType: 'P2P_TRANSFER', amount: BigInt(amount), currency: 'THB', fromUserId: payer, toUserId: recipient }, now);
    const opened = await openIntent(tx, intent, { payerUserId: payer, checks });
    if (opened.kind !== 'opened') throw new Error('duplicate in the floor');
    const failures = (await ledger.createTransfers(tx, transfers)).filter((f) => f.result !== 'exists');
    if (failures.length > 0) throw new Error(`ledger: ${failures.map((f) => f.result).join(', ')}`);
    const transitions = [
      { from: null, to: 'CREATED' }, { from: 'CREATED', to: 'VALIDATED' }, { from: 'VALIDATED', to: 'AUTHORIZED' }, { from: 'AUTHORIZED', to: 'SETTLED' },
    ];
    const accounts = { from: { accountName: fromName, userId: payer }, to: { accountName: toName, userId: recipient } };
    await closeIntent(tx, intent, transitions, historyRows(intent, accounts));
  });
}

let ok = 0;
let failed = 0;
const start = performance.now();
const warmEnd = start + warmupS * 1000;
const end = warmEnd + durationS * 1000;
const perWorker = Math.floor(userCount / concurrency);
await Promise.all(
  Array.from({ length: concurrency }, async (_, w) => {
    for (let i = 0; performance.now() < end; i++) {
      const payer = firstUser + w + concurrency * (i % perWorker);
      const recipient = firstUser + ((payer - firstUser + 1 + (i % (userCount - 1))) % userCount);
      try {
        await settleOne(payer, recipient);
        if (performance.now() >= warmEnd) ok++;
      } catch (error) {
        failed++;
        if (failed < 3) process.stderr.write(`${error.message}\n`);
      }
    }
  }),
);
const elapsedS = (performance.now() - warmEnd) / 1000;
process.stdout.write(`${JSON.stringify({ withReads, concurrency, durationS: Math.round(elapsedS * 10) / 10, ok, failed, throughputPerS: Math.round(ok / elapsedS) })}\n`);
await db.close();
