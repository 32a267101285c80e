// Set-based seeding of the bench database (PostgreSQL): users and merchants with funded wallets,
// auth policies, and settled intents of history with their events, history rows, ledger
// transfers and balances, as the service would have written them. No HTTP.
import { ledgerAccountId } from '../dist/ledger/account-id.js';
import { AccountFlags, LEDGER_THB } from '../dist/ledger/ledger.js';
import { createBatchSizeMax } from '../dist/ledger/sql-ledger.js';
import { ACCOUNT_TYPES } from '../dist/domain/model.js';

/** @typedef {import('../dist/adapters/database.js').Database} Database */
/** @typedef {import('../dist/ledger/ledger.js').Ledger} Ledger */

const NOSTRO = 'system.nostro.pspx.THB';
const TRANSIT = 'system.transit.INTERNAL_P2P.THB';

/**
 * @template T
 * @param {readonly T[]} items
 * @param {number} size
 */
function chunks(items, size) {
  /** @type {T[][]} */
  const out = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Wallets `<prefix>.<id>.THB` for ids [first, first + count), each funded from the PSPX nostro.
 * @param {Database} db
 * @param {Ledger} ledger
 * @param {{ prefix: string, type: import('../dist/domain/model.js').AccountType, first: number, count: number, balance: number }} wallets
 */
export async function seedWallets(db, ledger, { prefix, type, first, count, balance }) {
  const ids = Array.from({ length: count }, (_, i) => first + i);
  const names = ids.map((id) => `${prefix}.${id}.THB`);
  const ledgerIds = names.map((name) => ledgerAccountId(name));
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO accounts (account_name, ledger_account_id, account_type, user_id, currency)
       SELECT n, l, $3, u, 'THB' FROM unnest($1::text[], $2::uuid[], $4::bigint[]) AS s (n, l, u)
       ON CONFLICT (account_name) DO NOTHING`,
      [names, ledgerIds, type, ids],
    );
    const code = ACCOUNT_TYPES.indexOf(type) + 1;
    for (const batch of chunks(ledgerIds, createBatchSizeMax)) {
      const failures = await ledger.createAccounts(
        tx,
        // Every seeded wallet has an owner, so it keeps its balance history as the service's own would (docs/rules.md R58).
        batch.map((id) => ({ id, ledger: LEDGER_THB, code, flags: AccountFlags.debitsMustNotExceedCredits | AccountFlags.history })),
      );
      const refused = failures.find((f) => f.result !== 'exists');
      if (refused !== undefined) throw new Error(`seed accounts: ${refused.result}`);
    }
  });
  for (const batch of balance > 0 ? chunks(ledgerIds, 2_000) : []) {
    await db.transaction(async (tx) => {
      const failures = await ledger.createTransfers(
        tx,
        batch.map((id) => ({
          id: crypto.randomUUID(),
          debitAccountId: ledgerAccountId(NOSTRO),
          creditAccountId: id,
          amount: BigInt(balance),
          ledger: LEDGER_THB,
          code: 5,
          flags: 0,
        })),
      );
      const [refused] = failures;
      if (refused !== undefined) throw new Error(`seed funding: ${refused.result}`);
    });
  }
  return ledgerIds;
}

/**
 * 1,000 policies: 50 global, 45 for each of 10 apps, one for each of 500 merchants; few match, so each evaluation walks them all.
 * @param {Database} db
 */
export async function seedPolicies(db) {
  await db.query(`INSERT INTO auth_policies (scope, condition, required_step_up, reason_code, priority)
    SELECT CASE WHEN g <= 50 THEN 'global' WHEN g <= 500 THEN 'app:app-' || (g % 10) ELSE 'merchant:' || (g - 500) END,
           jsonb_build_object('amount_gte', 100000000 + g, 'currency', 'THB'),
           (ARRAY['PIN', 'OTP', 'BIOMETRIC'])[1 + g % 3], 'bench_' || g, 100 + g % 50
      FROM generate_series(1, 1000) AS g`);
}

/**
 * `count` settled P2P intents among users [first, first + users), spread over the last 30 days,
 * with what the service writes for each: 4 events, 2 history rows, 3 ledger transfers and the
 * balances they add up to.
 * `bulk`: without the triggers of the audit log and the history rows (the event feed, which a
 * platform prunes to its last days, and the reference locks, which only guard against concurrent
 * deletes), and without the ANALYZE, which the caller runs once after all its chunks.
 * `timeline`: these intents are the ones after `before` of `total` seeded in time order over the 30
 * days (a bulk seed in chunks), instead of spread over them at random.
 * @param {Database} db
 * @param {{ first: number, users: number, count: number, amount?: number, bulk?: boolean, timeline?: { before: number, total: number } }} intents
 */
export async function seedSettledIntents(db, { first, users, count, amount = 100, bulk = false, timeline }) {
  await db.transaction(async (tx) => {
    if (bulk) await tx.exec('SET LOCAL session_replication_role = replica');
    // Ids as the service makes them: the intent's time in the first 48 bits (UUID v7, and the
    // transfer ids derived from it), so that stored rows sit in the indexes where the service's
    // own would.
    await tx.exec(`CREATE TEMP TABLE seed ON COMMIT DROP AS
      WITH timed AS (
        SELECT g, ${
          timeline === undefined
            ? `now() - ((g % 30) * interval '1 day') - (random() * interval '1 hour')`
            : `now() - interval '30 days' * (1 - (g + ${timeline.before})::float8 / ${timeline.total})`
        } AS at FROM generate_series(1, ${count}) AS g
      ), prefixed AS (
        SELECT g, at, substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3) AS ms FROM timed
      )
      SELECT g, ${timeUuid('ms')} AS id, gen_random_uuid() AS key, ${timeUuid('ms')} AS t_reserve, ${timeUuid('ms')} AS t_post,
             ${timeUuid('ms')} AS t_credit, ${first} + (g % ${users}) AS payer, ${first} + ((g % ${users}) + 1) % ${users} AS payee, at
        FROM prefixed`);
    await tx.query(
      `INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel, from_account_name,
         to_account_name, from_user_id, to_user_id, amount, currency, status, metadata, transfer_ids, reserved_at, created_at, updated_at)
       SELECT id, key, 'wallet-api', md5(id::text), payer, 'P2P_TRANSFER', 'INTERNAL_P2P', 'user.' || payer || '.THB', 'user.' || payee || '.THB',
              payer, payee, $1, 'THB', 'SETTLED', jsonb_build_object('merchantUserId', 1 + g % 1000), ARRAY[t_reserve, t_post, t_credit], at, at, at
         FROM seed`,
      [amount],
    );
    await tx.exec(`INSERT INTO intent_events (intent_id, status_from, status_to, created_at)
      SELECT s.id, e.f, e.t, s.at FROM seed s
       CROSS JOIN (VALUES (1, NULL, 'CREATED'), (2, 'CREATED', 'VALIDATED'), (3, 'VALIDATED', 'AUTHORIZED'), (4, 'AUTHORIZED', 'SETTLED')) AS e (o, f, t)
       ORDER BY s.g, e.o`);
    await tx.query(
      `INSERT INTO transactions (intent_id, account_name, user_id, operation_type, direction, amount, fee_amount, currency, created_at)
       SELECT id, 'user.' || payer || '.THB', payer, 'P2P_TRANSFER', 'DEBIT', $1::bigint, 0, 'THB', at FROM seed
       UNION ALL
       SELECT id, 'user.' || payee || '.THB', payee, 'P2P_TRANSFER', 'CREDIT', $1, 0, 'THB', at FROM seed`,
      [amount],
    );
    const transit = ledgerAccountId(TRANSIT);
    await tx.query(
      `INSERT INTO ledger_transfers (id, debit_account_id, credit_account_id, amount, pending_id, timeout_s, ledger, code, flags, created_at, expires_at, pending_status)
       SELECT t_reserve, a.ledger_account_id, $2::uuid, $1::bigint, NULL, 1800, 1, 1, 2, at, at + interval '30 minutes', 'posted'
         FROM seed JOIN accounts a ON a.account_name = 'user.' || payer || '.THB'
       UNION ALL
       SELECT t_post, a.ledger_account_id, $2::uuid, $1::bigint, t_reserve, 0, 1, 1, 4, at, NULL, NULL
         FROM seed JOIN accounts a ON a.account_name = 'user.' || payer || '.THB'
       UNION ALL
       SELECT t_credit, $2::uuid, a.ledger_account_id, $1::bigint, NULL, 0, 1, 1, 0, at, NULL, NULL
         FROM seed JOIN accounts a ON a.account_name = 'user.' || payee || '.THB'`,
      [amount, transit],
    );
    // Balances: payer debits, payee credits, transit both (it nets to zero), on shard 0.
    await tx.query(
      `UPDATE ledger_balances b SET debits_posted = b.debits_posted + m.debits, credits_posted = b.credits_posted + m.credits
         FROM (SELECT account_id, sum(debits)::bigint AS debits, sum(credits)::bigint AS credits FROM (
                 SELECT a.ledger_account_id AS account_id, $1::bigint AS debits, 0::bigint AS credits FROM seed JOIN accounts a ON a.account_name = 'user.' || payer || '.THB'
                 UNION ALL
                 SELECT a.ledger_account_id, 0, $1 FROM seed JOIN accounts a ON a.account_name = 'user.' || payee || '.THB'
                 UNION ALL
                 SELECT $2::uuid, $1, $1 FROM seed) AS moves GROUP BY account_id) AS m
        WHERE b.account_id = m.account_id AND b.shard = 0`,
      [amount, transit],
    );
  });
  if (!bulk) await db.exec('ANALYZE intents; ANALYZE transactions; ANALYZE intent_events; ANALYZE ledger_transfers');
}

/** The tables a settled intent writes rows to, whose indexes a bulk seed builds once at its end. */
const SEEDED_TABLES = ['intents', 'intent_events', 'transactions', 'ledger_transfers'];

/**
 * `count` settled intents as seedSettledIntents writes them, in time order over the 30 days, in bulk
 * chunks of `chunk` (one transaction each). The seeded tables' indexes other than their primary
 * keys (whose keys arrive in time order here, as the service's do) are dropped first and built
 * again at the end: ten million inserts into random places of a dozen indexes took hours on a
 * 2-core machine, a sorted build takes minutes, and what the live phase then inserts into is an
 * index of the same rows.
 * @param {Database} db
 * @param {{ first: number, users: number, count: number, chunk?: number, log?: (...m: unknown[]) => void }} intents
 */
export async function seedManySettledIntents(db, { first, users, count, chunk = 1_000_000, log = () => {} }) {
  const { rows: indexes } = await db.query(
    `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition
       FROM pg_index i
      WHERE i.indrelid = ANY ($1::regclass[]) AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`,
    [SEEDED_TABLES],
  );
  const { rows: uniques } = await db.query(
    `SELECT conrelid::regclass::text AS "table", conname AS name, pg_get_constraintdef(oid) AS definition
       FROM pg_constraint WHERE conrelid = ANY ($1::regclass[]) AND contype = 'u'`,
    [SEEDED_TABLES],
  );
  for (const u of uniques) await db.exec(`ALTER TABLE ${u.table} DROP CONSTRAINT ${u.name}`);
  for (const index of indexes) await db.exec(`DROP INDEX ${index.name}`);
  for (let done = 0; done < count; done += chunk) {
    const size = Math.min(chunk, count - done);
    await seedSettledIntents(db, { first, users, count: size, bulk: true, timeline: { before: done, total: count } });
    log(`seeded ${done + size} of ${count} intents`);
  }
  await db.transaction(async (tx) => {
    await tx.exec(`SET LOCAL maintenance_work_mem = '256MB'`);
    for (const u of uniques) await tx.exec(`ALTER TABLE ${u.table} ADD CONSTRAINT ${u.name} ${u.definition}`);
    for (const index of indexes) await tx.exec(String(index.definition));
  });
  log(`built ${uniques.length + indexes.length} indexes`);
}
/**
 * SQL for a random UUID whose first 6 bytes are `msColumn` (a 6-byte bytea of epoch milliseconds).
 * @param {string} msColumn
 */
function timeUuid(msColumn) {
  return `encode(overlay(uuid_send(gen_random_uuid()) PLACING ${msColumn} FROM 1 FOR 6), 'hex')::uuid`;
}
