import type { Database, Sql } from '../../adapters/database.js';
import { LEDGER_INVARIANT_CHECKS } from '../../ledger/invariants.js';
import { transferId } from '../intents/money/money-path.js';
import { ALLOWED_TRANSITIONS, PSP_INITIAL_SUB_STATE, PSP_TRANSITIONS } from '../intents/store/state-machine.js';
import { CHANNELS, INTENT_STATUSES, type IntentStatus, UNOWNED_ACCOUNT_TYPES } from '../model.js';
import { CHANNEL_BEHAVIOUR } from '../channels/channels.js';

/**
 * The invariant audit: what must hold between the ledger and the service's own records at any
 * commit. Every check is a set-based query (the money checks of single intents hash their
 * deterministic transfer ids in code first, a page at a time, since SQL has no UUID v5), so the
 * audit is cheap enough to run after every test and periodically in production.
 */

/** Names of the checks and the result's shape are the client package's: the CLI, the admin route and monitoring key on them. */
export { AUDIT_CHECKS, type AuditCheck, type AuditResult, type AuditViolation } from '@payorch/client';
import type { AuditCheck, AuditResult, AuditViolation } from '@payorch/client';

export interface AuditOptions {
  /** How long a pending transfer may outlive its timeout before the sweeper counts as late. */
  readonly expiryGraceS?: number;
  /** Intent-level checks look only at intents updated since then (periodic runs); ledger-wide checks look at everything. */
  readonly since?: Date;
}

/** The sweeper runs every few seconds; a minute late means it is not running. */
export const EXPIRY_GRACE_S_DEFAULT = 60;
/** Per check: past this the data is broken enough that more lines add nothing. */
export const VIOLATIONS_PER_CHECK_MAX = 20;
/** Intents per round trip of the per-intent money checks. */
const intentPageSizeMax = 500;
/** 10^6 intents per run; a larger store is audited with `since`. */
const intentPagesMax = 2000;

const IN_FLIGHT: readonly IntentStatus[] = ['AUTHORIZED', 'MANUAL_REVIEW', 'SETTLING'];
const RELEASED: readonly IntentStatus[] = ['FAILED', 'CANCELED', 'EXPIRED'];

interface Context {
  readonly expiryGraceS: number;
  readonly since: Date | null;
}

type Check = (sql: Sql, context: Context) => Promise<AuditViolation[]>;

/**
 * The audit on one consistent snapshot (REPEATABLE READ, read only): without it an intent that
 * settles between two of the checks' queries would read as a violation. What `payorch audit`
 * and GET /admin/audit run.
 */
export async function runAudit(db: Database, options: AuditOptions = {}): Promise<AuditResult> {
  return db.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    return auditInvariants(tx, options);
  });
}

/** The audit on the caller's executor (a transaction it already holds, or a quiet database in tests). */
export async function auditInvariants(sql: Sql, options: AuditOptions = {}): Promise<AuditResult> {
  const context: Context = { expiryGraceS: options.expiryGraceS ?? EXPIRY_GRACE_S_DEFAULT, since: options.since ?? null };
  const checks: readonly Check[] = [
    ledgerCheck('ledger_balanced', LEDGER_INVARIANT_CHECKS.ledgerTotals),
    ledgerCheck('ledger_pending_matches_transfers', LEDGER_INVARIANT_CHECKS.pendingAgainstTransfers),
    ledgerCheck('ledger_guarded_limits', LEDGER_INVARIANT_CHECKS.guardedAccounts),
    ledgerCheck('balance_history_replays', LEDGER_INVARIANT_CHECKS.balanceHistory),
    checkAccountMap,
    checkTransitAccounts,
    checkGuardedAccountTypes,
    checkIntentMoney,
    checkAuditTrails,
    checkOverduePending,
  ];
  const checkedAt = new Date().toISOString();
  const violations: AuditViolation[] = [];
  for (const check of checks) {
    violations.push(...(await check(sql, context)));
  }
  return { ok: violations.length === 0, checkedAt, violations };
}

/** One line per violation, for the CLI and logs. */
export function formatViolation(violation: AuditViolation): string {
  const where = [
    ...(violation.intentId === undefined ? [] : [`intent ${violation.intentId}`]),
    ...(violation.account === undefined ? [] : [`account ${violation.account}`]),
  ];
  return `${violation.check}: ${where.length === 0 ? '' : `${where.join(', ')}: `}${violation.detail}`;
}

/** The ledger's own invariants (src/ledger/invariants.ts), each under its audit name. */
function ledgerCheck(check: AuditCheck, run: (sql: Sql) => Promise<string[]>): Check {
  return async (sql) => (await run(sql)).map((detail) => ({ check, detail }));
}

/** Each mapped account exists in the ledger, on its ledger, guarded exactly when its type is (docs/rules.md R19). */
async function checkAccountMap(sql: Sql): Promise<AuditViolation[]> {
  const { rows } = await sql.query<{
    account_name: string;
    account_type: string;
    flags: number | null;
    ledger: number | null;
    ledger_number: number;
  }>(
    `SELECT a.account_name, a.account_type, l.flags, l.ledger, a.ledger_number
       FROM accounts a LEFT JOIN ledger_accounts l ON l.id = a.ledger_account_id
      WHERE l.id IS NULL
         OR l.ledger <> a.ledger_number
         OR ledger_debits_must_not_exceed_credits(l.flags) <> (a.account_type <> ALL ($1::text[]))
      ORDER BY a.account_name
      LIMIT $2`,
    [UNOWNED_ACCOUNT_TYPES, VIOLATIONS_PER_CHECK_MAX],
  );
  return rows.map((row) => ({
    check: 'account_map',
    account: row.account_name,
    detail:
      row.flags === null
        ? 'no ledger account behind this account'
        : `${row.account_type} has ledger flags ${row.flags} on ledger ${row.ledger} (map says ledger ${row.ledger_number}); ` +
          'owned types must carry debits_must_not_exceed_credits and unowned ones must not',
  }));
}

/**
 * A resolve to FAILED (and the PSP worker's own failures, through the outbox) fail the intent
 * first and queue the void in the same transaction: until the outbox runs that job, the FAILED
 * intent still holds its reservation, by design.
 */
const RELEASE_QUEUED = `SELECT 1 FROM outbox o WHERE o.intent_id = i.id AND o.kind = 'void_pending' AND o.done_at IS NULL`;

/**
 * docs/rules.md R17, R18: a transit account only relays. Settlement posts and pays out in one linked batch, so
 * its posted net is zero at every commit, and it holds in pending exactly the reservations of its
 * channel's in-flight intents (and of FAILED ones whose void is still queued).
 */
async function checkTransitAccounts(sql: Sql): Promise<AuditViolation[]> {
  const { rows } = await sql.query<{
    account_name: string;
    held: boolean;
    net_posted: string;
    debits_pending: string;
    credits_pending: string;
    reserved: string;
    intents: string;
  }>(
    `WITH transit_of (channel, transit) AS (SELECT * FROM unnest($1::text[], $2::text[])),
     reserved AS (
       SELECT 'system.transit.' || m.transit || '.' || i.currency AS account_name,
              sum(i.amount + i.pre_fee_amount) AS reserved, count(*) AS intents
         FROM intents i JOIN transit_of m ON m.channel = i.channel
        WHERE i.status = ANY ($3::text[]) OR (i.status = 'FAILED' AND EXISTS (${RELEASE_QUEUED}))
        GROUP BY 1
     ), held AS (
       SELECT a.account_name, sum(b.credits_posted - b.debits_posted) AS net_posted,
              sum(b.debits_pending) AS debits_pending, sum(b.credits_pending) AS credits_pending
         FROM accounts a JOIN ledger_balances b ON b.account_id = a.ledger_account_id
        WHERE a.account_type = 'TRANSIT'
        GROUP BY a.account_name
     )
     SELECT coalesce(h.account_name, r.account_name) AS account_name, h.account_name IS NOT NULL AS held,
            coalesce(h.net_posted, 0)::text AS net_posted, coalesce(h.debits_pending, 0)::text AS debits_pending,
            coalesce(h.credits_pending, 0)::text AS credits_pending,
            coalesce(r.reserved, 0)::text AS reserved, coalesce(r.intents, 0)::text AS intents
       FROM held h FULL JOIN reserved r ON r.account_name = h.account_name
      WHERE h.account_name IS NULL OR h.net_posted <> 0 OR h.debits_pending <> 0
         OR h.credits_pending <> coalesce(r.reserved, 0)
      ORDER BY 1
      LIMIT $4`,
    [CHANNELS, CHANNELS.map((channel) => CHANNEL_BEHAVIOUR[channel].transit), IN_FLIGHT, VIOLATIONS_PER_CHECK_MAX],
  );
  return rows.map((row) => ({
    check: 'transit_balanced',
    account: row.account_name,
    detail: row.held
      ? `posted net ${row.net_posted} (must be 0), pending debits ${row.debits_pending} (must be 0), pending credits ` +
        `${row.credits_pending} against ${row.reserved} reserved by ${row.intents} in-flight intents`
      : `${row.intents} in-flight intents reserve ${row.reserved} on a transit account that does not exist`,
  }));
}

/** docs/rules.md R19 by account type (the ledger check goes by flags): an owned account is never below zero, reservations included. */
async function checkGuardedAccountTypes(sql: Sql): Promise<AuditViolation[]> {
  const { rows } = await sql.query<{ account_name: string; account_type: string; balance: string; held: string }>(
    `SELECT a.account_name, a.account_type,
            sum(b.credits_posted - b.debits_posted)::text AS balance, sum(b.debits_pending)::text AS held
       FROM accounts a JOIN ledger_balances b ON b.account_id = a.ledger_account_id
      WHERE a.account_type <> ALL ($1::text[])
      GROUP BY a.account_name, a.account_type
     HAVING sum(b.credits_posted - b.debits_posted - b.debits_pending) < 0
      ORDER BY a.account_name
      LIMIT $2`,
    [UNOWNED_ACCOUNT_TYPES, VIOLATIONS_PER_CHECK_MAX],
  );
  return rows.map((row) => ({
    check: 'guarded_account_negative',
    account: row.account_name,
    detail: `${row.account_type} is below zero: posted balance ${row.balance}, ${row.held} more held by reservations`,
  }));
}

/** The sweeper releases a reservation at its timeout; one still pending a grace period later was missed. */
async function checkOverduePending(sql: Sql, context: Context): Promise<AuditViolation[]> {
  const { rows } = await sql.query<{ id: string; amount: string; expires_at: Date; account_name: string | null }>(
    `SELECT t.id, t.amount::text AS amount, t.expires_at, a.account_name
       FROM ledger_transfers t LEFT JOIN accounts a ON a.ledger_account_id = t.debit_account_id
      WHERE t.pending_status = 'pending' AND t.expires_at < now() - make_interval(secs => $1)
      ORDER BY t.expires_at
      LIMIT $2`,
    [context.expiryGraceS, VIOLATIONS_PER_CHECK_MAX],
  );
  return rows.map((row) => ({
    check: 'pending_outlived_timeout',
    ...(row.account_name === null ? {} : { account: row.account_name }),
    detail: `pending transfer ${row.id} of ${row.amount} expired at ${row.expires_at.toISOString()} and is still pending`,
  }));
}

// ---------------------------------------------------------------------------------------------
// Per intent: the ledger movements that its status implies (docs/rules.md R18), found by deterministic ids.

interface IntentMoneyRow {
  id: string;
  status: IntentStatus;
  amount: bigint;
  pre_fee_amount: bigint;
  post_fee_amount: bigint;
  from_account_name: string | null;
  from_ledger_id: string | null;
  to_ledger_id: string | null;
  transit_ledger_id: string | null;
  release_queued: boolean;
  fee_legs: Array<{ account: string; ledgerId: string | null; amount: string }>;
}

/**
 * What one transfer id must be: a reservation posted or still pending, the post of it, a plain
 * transfer, absent, or (for an intent that ended without money) absent or released.
 */
type Rule = 'posted_reserve' | 'pending_reserve' | 'post' | 'single' | 'absent' | 'released_or_absent' | 'not_posted';

interface Expectation {
  readonly check: AuditCheck;
  readonly intentId: string;
  readonly step: string;
  readonly transferId: string;
  readonly rule: Rule;
  readonly debitId: string | null;
  readonly creditId: string | null;
  readonly amount: bigint | null;
  readonly pendingId: string | null;
}

async function checkIntentMoney(sql: Sql, context: Context): Promise<AuditViolation[]> {
  const violations: AuditViolation[] = [];
  let cursor = '00000000-0000-0000-0000-000000000000';
  for (let page = 0; page < intentPagesMax; page += 1) {
    const intents = await loadIntentPage(sql, context, cursor);
    const expectations: Expectation[] = [];
    for (const intent of intents) {
      const planned = planOf(intent);
      violations.push(...planned.violations);
      expectations.push(...planned.expectations);
    }
    violations.push(...(await compareTransfers(sql, expectations)));
    const last = intents.at(-1);
    if (last === undefined || intents.length < intentPageSizeMax) return capPerCheck(violations);
    cursor = last.id;
  }
  return [
    ...capPerCheck(violations),
    {
      check: 'audit_incomplete',
      detail: `more than ${intentPagesMax * intentPageSizeMax} intents in scope; run the audit with a since date`,
    },
  ];
}

function capPerCheck(violations: readonly AuditViolation[]): AuditViolation[] {
  const counts = new Map<AuditCheck, number>();
  return violations.filter((violation) => {
    const count = (counts.get(violation.check) ?? 0) + 1;
    counts.set(violation.check, count);
    return count <= VIOLATIONS_PER_CHECK_MAX;
  });
}

async function loadIntentPage(sql: Sql, context: Context, cursor: string): Promise<IntentMoneyRow[]> {
  const { rows } = await sql.query<IntentMoneyRow>(
    `WITH transit_of (channel, transit) AS (SELECT * FROM unnest($1::text[], $2::text[]))
     SELECT i.id, i.status, i.amount, i.pre_fee_amount, i.post_fee_amount, i.from_account_name,
            f.ledger_account_id AS from_ledger_id, t.ledger_account_id AS to_ledger_id,
            tr.ledger_account_id AS transit_ledger_id, EXISTS (${RELEASE_QUEUED}) AS release_queued,
            coalesce((SELECT jsonb_agg(jsonb_build_object('account', s.account, 'ledgerId', a.ledger_account_id,
                                                          'amount', s.amount::text) ORDER BY s.account)
                        FROM (SELECT x->>'account' AS account, sum((x->>'amount')::bigint) AS amount
                                FROM jsonb_array_elements(i.fee_splits) AS x GROUP BY 1) AS s
                        LEFT JOIN accounts a ON a.account_name = s.account), '[]'::jsonb) AS fee_legs
       FROM intents i
       LEFT JOIN transit_of m ON m.channel = i.channel
       LEFT JOIN accounts f ON f.account_name = i.from_account_name
       LEFT JOIN accounts t ON t.account_name = i.to_account_name
       LEFT JOIN accounts tr ON tr.account_name = 'system.transit.' || m.transit || '.' || i.currency
      WHERE i.id > $3::uuid AND ($4::timestamptz IS NULL OR i.updated_at >= $4::timestamptz)
      ORDER BY i.id
      LIMIT $5`,
    [CHANNELS, CHANNELS.map((channel) => CHANNEL_BEHAVIOUR[channel].transit), cursor, context.since, intentPageSizeMax],
  );
  return rows;
}

/** The transfers an intent's status implies, or the violations that make them unknowable. */
function planOf(intent: IntentMoneyRow): { expectations: Expectation[]; violations: AuditViolation[] } {
  const { status } = intent;
  if (status === 'SETTLED') return settledPlan(intent);
  if (IN_FLIGHT.includes(status)) return unsettledPlan(intent, 'in_flight_reservation', 'pending_reserve');
  // CREATED, VALIDATED, and a FAILED intent whose void is queued: nothing may be posted yet.
  if (RELEASED.includes(status) && !intent.release_queued) return unsettledPlan(intent, 'unsettled_no_money', 'released_or_absent');
  return unsettledPlan(intent, 'unsettled_no_money', 'not_posted');
}

function settledPlan(intent: IntentMoneyRow): { expectations: Expectation[]; violations: AuditViolation[] } {
  const violation = (detail: string): AuditViolation => ({ check: 'settled_postings', intentId: intent.id, detail });
  const { from_ledger_id: from, to_ledger_id: to, transit_ledger_id: transit } = intent;
  if (from === null || to === null || transit === null) {
    return {
      expectations: [],
      violations: [
        violation(
          `a SETTLED intent needs its from, to and transit accounts in the account map (from: ${intent.from_account_name ?? 'none'})`,
        ),
      ],
    };
  }
  const violations: AuditViolation[] = [];
  const feeTotal = intent.fee_legs.reduce((sum, leg) => sum + BigInt(leg.amount), 0n);
  if (feeTotal !== intent.pre_fee_amount + intent.post_fee_amount) {
    violations.push(violation(`fee splits total ${feeTotal}, not preFee ${intent.pre_fee_amount} + postFee ${intent.post_fee_amount}`));
  }
  const expect = expectationsFor(intent, 'settled_postings');
  const debited = intent.amount + intent.pre_fee_amount;
  const received = intent.amount - intent.post_fee_amount;
  const reserveId = transferId(intent.id, 'reserve');
  const expectations = [
    expect('reserve', 'posted_reserve', { debitId: from, creditId: transit, amount: debited }),
    expect('post', 'post', { amount: debited, pendingId: reserveId }),
    received > 0n ? expect('credit', 'single', { debitId: transit, creditId: to, amount: received }) : expect('credit', 'absent', {}),
    expect('void', 'absent', {}),
  ];
  for (const leg of intent.fee_legs) {
    if (leg.ledgerId === null) {
      violations.push(violation(`fee account ${leg.account} is not in the account map`));
    } else if (BigInt(leg.amount) > 0n) {
      expectations.push(expect(`fee/${leg.ledgerId}`, 'single', { debitId: transit, creditId: leg.ledgerId, amount: BigInt(leg.amount) }));
    }
  }
  return { expectations, violations };
}

/** In flight: only the reservation exists. Ended without settling: nothing stayed moved. */
function unsettledPlan(
  intent: IntentMoneyRow,
  check: AuditCheck,
  reserveRule: Rule,
): { expectations: Expectation[]; violations: AuditViolation[] } {
  const expect = expectationsFor(intent, check);
  const expectations = [
    reserveRule === 'pending_reserve'
      ? expect('reserve', 'pending_reserve', {
          debitId: intent.from_ledger_id,
          creditId: intent.transit_ledger_id,
          amount: intent.amount + intent.pre_fee_amount,
        })
      : expect('reserve', reserveRule, {}),
    expect('post', 'absent', {}),
    expect('credit', 'absent', {}),
    ...intent.fee_legs.flatMap((leg) => (leg.ledgerId === null ? [] : [expect(`fee/${leg.ledgerId}`, 'absent', {})])),
  ];
  return { expectations, violations: [] };
}

function expectationsFor(intent: IntentMoneyRow, check: AuditCheck) {
  return (
    step: string,
    rule: Rule,
    fields: { debitId?: string | null; creditId?: string | null; amount?: bigint; pendingId?: string },
  ): Expectation => ({
    check,
    intentId: intent.id,
    step,
    transferId: transferId(intent.id, step),
    rule,
    debitId: fields.debitId ?? null,
    creditId: fields.creditId ?? null,
    amount: fields.amount ?? null,
    pendingId: fields.pendingId ?? null,
  });
}

interface TransferMismatchRow {
  ord: bigint;
  found: boolean;
  debit_account_id: string | null;
  credit_account_id: string | null;
  amount: string | null;
  flags: number | null;
  pending_id: string | null;
  pending_status: string | null;
}

/** One query per page: every expected transfer against what the ledger holds under its id. */
async function compareTransfers(sql: Sql, expectations: readonly Expectation[]): Promise<AuditViolation[]> {
  if (expectations.length === 0) return [];
  const { rows } = await sql.query<TransferMismatchRow>(
    `SELECT e.ord, t.id IS NOT NULL AS found, t.debit_account_id, t.credit_account_id, t.amount::text AS amount,
            t.flags, t.pending_id, t.pending_status
       FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::bigint[], $6::uuid[])
            WITH ORDINALITY AS e (transfer_id, rule, debit_id, credit_id, amount, pending_id, ord)
       LEFT JOIN ledger_transfers t ON t.id = e.transfer_id
      WHERE NOT coalesce(CASE e.rule
              WHEN 'absent' THEN t.id IS NULL
              WHEN 'released_or_absent' THEN t.id IS NULL OR t.pending_status IN ('voided', 'expired')
              WHEN 'not_posted' THEN t.id IS NULL OR t.pending_status IS DISTINCT FROM 'posted'
              WHEN 'posted_reserve' THEN ledger_transfer_kind(t.flags) = 'pending' AND t.pending_status = 'posted'
                AND t.debit_account_id = e.debit_id AND t.credit_account_id = e.credit_id AND t.amount = e.amount
              WHEN 'pending_reserve' THEN ledger_transfer_kind(t.flags) = 'pending' AND t.pending_status = 'pending'
                AND t.debit_account_id = e.debit_id AND t.credit_account_id = e.credit_id AND t.amount = e.amount
              WHEN 'post' THEN ledger_transfer_kind(t.flags) = 'post' AND t.pending_id = e.pending_id AND t.amount = e.amount
              WHEN 'single' THEN ledger_transfer_kind(t.flags) = 'single'
                AND t.debit_account_id = e.debit_id AND t.credit_account_id = e.credit_id AND t.amount = e.amount
            END, false)
      ORDER BY e.ord`,
    [
      expectations.map((e) => e.transferId),
      expectations.map((e) => e.rule),
      expectations.map((e) => e.debitId),
      expectations.map((e) => e.creditId),
      expectations.map((e) => (e.amount === null ? null : e.amount.toString())),
      expectations.map((e) => e.pendingId),
    ],
  );
  return rows.flatMap((row) => {
    const expectation = expectations[Number(row.ord) - 1];
    if (expectation === undefined) throw new Error(`audit: transfer comparison returned unknown row ${row.ord}`);
    return [{ check: expectation.check, intentId: expectation.intentId, detail: mismatchDetail(expectation, row) }];
  });
}

const RULE_TEXT: Readonly<Record<Rule, string>> = {
  posted_reserve: 'a posted reservation',
  pending_reserve: 'a pending reservation',
  post: 'the full post of the reservation',
  single: 'a single-phase transfer',
  absent: 'no transfer',
  released_or_absent: 'no transfer, or a voided or expired reservation',
  not_posted: 'no transfer, or a reservation not posted',
};

function mismatchDetail(expected: Expectation, found: TransferMismatchRow): string {
  const want =
    expected.amount === null
      ? RULE_TEXT[expected.rule]
      : `${RULE_TEXT[expected.rule]} of ${expected.amount}${expected.debitId === null ? '' : ` from ${expected.debitId} to ${expected.creditId}`}`;
  const have = found.found
    ? `transfer of ${found.amount} from ${found.debit_account_id} to ${found.credit_account_id}, flags ${found.flags}` +
      `${found.pending_status === null ? '' : `, ${found.pending_status}`}${found.pending_id === null ? '' : `, resolving ${found.pending_id}`}`
    : 'nothing';
  return `${expected.step} transfer ${expected.transferId}: expected ${want}, found ${have}`;
}

// ---------------------------------------------------------------------------------------------
// Per intent: the audit trail is a path of the state machine (src/domain/intents/store/state-machine.ts).

/**
 * Two chains share one log. Intent-status events chain among themselves from null → CREATED;
 * PSP sub-state events (statusFrom a sub-state, or statusTo one) chain among themselves from NEW,
 * belong to the PSPX channel and happen while the intent is AUTHORIZED. A sub-state event that
 * also moves the intent (INQUIRING → MANUAL_REVIEW) is checked in both chains. Window functions
 * number each chain, so one statement checks every event against its predecessor in its own
 * chain, and that the last status of the trail is the intent's.
 */
async function checkAuditTrails(sql: Sql, context: Context): Promise<AuditViolation[]> {
  const { rows } = await sql.query<TrailProblemRow>(
    `WITH allowed (status_from, status_to) AS (SELECT * FROM unnest($2::text[], $3::text[])),
     psp (status_from, status_to, intent_to) AS (SELECT * FROM unnest($4::text[], $5::text[], $6::text[])),
     scope AS (
       SELECT id, status, channel FROM intents WHERE $8::timestamptz IS NULL OR updated_at >= $8::timestamptz
     ), ev AS (
       SELECT e.id, e.intent_id, e.status_from, e.status_to, s.channel,
              (e.status_from IS NOT NULL AND e.status_from <> ALL ($1::text[])) OR e.status_to <> ALL ($1::text[]) AS is_sub
         FROM intent_events e JOIN scope s ON s.id = e.intent_id
     ), classified AS (
       SELECT ev.*,
              CASE WHEN NOT ev.is_sub THEN ev.status_to
                   ELSE (SELECT p.intent_to FROM psp p WHERE p.status_from = ev.status_from AND p.status_to = ev.status_to) END AS intent_to
         FROM ev
     ), numbered AS (
       SELECT c.*,
              count(*) FILTER (WHERE intent_to IS NOT NULL) OVER w AS status_n,
              count(*) FILTER (WHERE is_sub) OVER w AS sub_n
         FROM classified c WINDOW w AS (PARTITION BY intent_id ORDER BY id)
     ), placed AS (
       SELECT n.*, ps.intent_to AS status_before, coalesce(pb.status_to, $7) AS sub_before
         FROM numbered n
         LEFT JOIN numbered ps ON ps.intent_id = n.intent_id AND ps.intent_to IS NOT NULL
              AND ps.status_n = n.status_n - CASE WHEN n.intent_to IS NOT NULL THEN 1 ELSE 0 END
         LEFT JOIN numbered pb ON pb.intent_id = n.intent_id AND pb.is_sub
              AND pb.sub_n = n.sub_n - CASE WHEN n.is_sub THEN 1 ELSE 0 END
     ), judged AS (
       SELECT p.*,
              CASE
                WHEN NOT p.is_sub AND p.status_from IS NULL AND p.status_before IS NOT NULL
                  THEN 'statusFrom is null after the first event'
                WHEN NOT p.is_sub AND p.status_from IS DISTINCT FROM p.status_before
                  THEN 'statusFrom is not the previous status'
                WHEN NOT p.is_sub AND NOT EXISTS (SELECT 1 FROM allowed a
                      WHERE a.status_from IS NOT DISTINCT FROM p.status_before AND a.status_to = p.status_to)
                  THEN 'transition not in the state table'
                WHEN p.is_sub AND p.channel <> 'PSPX_TRANSFER'
                  THEN 'PSP sub-state event on a channel without PSP sub-states'
                WHEN p.is_sub AND p.status_before IS DISTINCT FROM 'AUTHORIZED'
                  THEN 'PSP sub-state move while the intent is not AUTHORIZED'
                WHEN p.is_sub AND p.status_from IS DISTINCT FROM p.sub_before
                  THEN 'statusFrom is not the previous PSP sub-state'
                WHEN p.is_sub AND NOT EXISTS (SELECT 1 FROM psp s WHERE s.status_from = p.sub_before AND s.status_to = p.status_to)
                  THEN 'PSP sub-state move not in the PSP table'
                WHEN p.is_sub AND p.intent_to IS NOT NULL AND NOT EXISTS (SELECT 1 FROM allowed a
                      WHERE a.status_from IS NOT DISTINCT FROM p.status_before AND a.status_to = p.intent_to)
                  THEN 'the intent move of this PSP event is not in the state table'
              END AS problem
         FROM placed p
     ), last AS (
       SELECT DISTINCT ON (intent_id) intent_id, intent_to FROM numbered WHERE intent_to IS NOT NULL ORDER BY intent_id, id DESC
     ), bad_events AS (
       SELECT 'audit_trail' AS check_name, intent_id, id AS event_id, status_from, status_to, status_before, sub_before,
              problem, NULL::text AS status, NULL::text AS last_status, row_number() OVER (ORDER BY intent_id, id) AS n
         FROM judged WHERE problem IS NOT NULL
     ), bad_ends AS (
       SELECT 'audit_trail_status' AS check_name, s.id AS intent_id, NULL::bigint AS event_id, NULL::text AS status_from,
              NULL::text AS status_to, NULL::text AS status_before, NULL::text AS sub_before, NULL::text AS problem,
              s.status, l.intent_to AS last_status, row_number() OVER (ORDER BY s.id) AS n
         FROM scope s LEFT JOIN last l ON l.intent_id = s.id
        WHERE l.intent_to IS DISTINCT FROM s.status
     )
     SELECT * FROM bad_events WHERE n <= $9
     UNION ALL
     SELECT * FROM bad_ends WHERE n <= $9
     ORDER BY check_name, intent_id, event_id`,
    [
      INTENT_STATUSES,
      ALLOWED_TRANSITIONS.map((t) => t.from),
      ALLOWED_TRANSITIONS.map((t) => t.to),
      PSP_TRANSITIONS.map((t) => t.from),
      PSP_TRANSITIONS.map((t) => t.to),
      PSP_TRANSITIONS.map((t) => t.intentTo),
      PSP_INITIAL_SUB_STATE,
      context.since,
      VIOLATIONS_PER_CHECK_MAX,
    ],
  );
  return rows.map((row) => ({ check: row.check_name, intentId: row.intent_id, detail: trailDetail(row) }));
}

interface TrailProblemRow {
  check_name: 'audit_trail' | 'audit_trail_status';
  intent_id: string;
  event_id: bigint | null;
  status_from: string | null;
  status_to: string | null;
  status_before: string | null;
  sub_before: string | null;
  problem: string | null;
  status: string | null;
  last_status: string | null;
}

function trailDetail(row: TrailProblemRow): string {
  if (row.check_name === 'audit_trail_status') {
    return row.last_status === null
      ? `status ${row.status} but no status event in the audit trail`
      : `status ${row.status} but the audit trail ends in ${row.last_status}`;
  }
  return (
    `event ${row.event_id} ${row.status_from ?? 'null'} → ${row.status_to}: ${row.problem} ` +
    `(status before: ${row.status_before ?? 'none'}, PSP sub-state before: ${row.sub_before})`
  );
}
