import { isUuid } from '../../accounts/accounts.js';
import { apiError } from '../../errors.js';
import { CoalescedReads, departureFor } from '../../../adapters/coalesced-reads.js';
import { type Database, plannedEachCall, type Sql } from '../../../adapters/database.js';
import type { Channel, IntentStatus, OperationType } from '../../model.js';

/** An intent as stored; money as bigint. */
export interface Intent {
  readonly id: string;
  readonly idempotencyKey: string;
  readonly serviceId: string;
  readonly requestFingerprint: string;
  readonly userId: number;
  readonly operationType: OperationType;
  readonly channel: Channel;
  readonly fromAccountName: string | null;
  readonly toAccountName: string;
  readonly fromUserId: number | null;
  readonly toUserId: number | null;
  readonly externalRef: string | null;
  readonly amount: bigint;
  readonly preFeeAmount: bigint;
  readonly postFeeAmount: bigint;
  readonly feeSplits: ReadonlyArray<{ account: string; amount: string }>;
  readonly currency: string;
  readonly status: IntentStatus;
  readonly pspState: string | null;
  readonly failureReason: string | null;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly fromName: string | null;
  readonly toName: string | null;
  readonly comment: string | null;
  readonly live: boolean;
  readonly settlementDate: string | null;
  readonly version: number;
  readonly expiresAt: Date | null;
  readonly reservedAt: Date | null;
  readonly canceledAt: Date | null;
  readonly redeemedAt: Date | null;
  readonly cancelReason: string | null;
  readonly qrSignature: Uint8Array | null;
  readonly issuedByUserId: number | null;
  readonly redeemedByUserId: number | null;
  readonly confirmIdempotencyKey: string | null;
  /** Drawn by the confirm request whose claim redeemed the invoice (confirm-invoice.ts). */
  readonly confirmAttemptId: string | null;
  readonly transferIds: readonly string[];
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

const COLUMNS: ReadonlyArray<readonly [keyof Intent, string]> = [
  ['id', 'id'],
  ['idempotencyKey', 'idempotency_key'],
  ['serviceId', 'service_id'],
  ['requestFingerprint', 'request_fingerprint'],
  ['userId', 'user_id'],
  ['operationType', 'operation_type'],
  ['channel', 'channel'],
  ['fromAccountName', 'from_account_name'],
  ['toAccountName', 'to_account_name'],
  ['fromUserId', 'from_user_id'],
  ['toUserId', 'to_user_id'],
  ['externalRef', 'external_ref'],
  ['amount', 'amount'],
  ['preFeeAmount', 'pre_fee_amount'],
  ['postFeeAmount', 'post_fee_amount'],
  ['feeSplits', 'fee_splits'],
  ['currency', 'currency'],
  ['status', 'status'],
  ['pspState', 'psp_state'],
  ['failureReason', 'failure_reason'],
  ['metadata', 'metadata'],
  ['fromName', 'from_name'],
  ['toName', 'to_name'],
  ['comment', 'comment'],
  ['live', 'live'],
  ['settlementDate', 'settlement_date'],
  ['version', 'version'],
  ['expiresAt', 'expires_at'],
  ['reservedAt', 'reserved_at'],
  ['canceledAt', 'canceled_at'],
  ['redeemedAt', 'redeemed_at'],
  ['cancelReason', 'cancel_reason'],
  ['qrSignature', 'qr_signature'],
  ['issuedByUserId', 'issued_by_user_id'],
  ['redeemedByUserId', 'redeemed_by_user_id'],
  ['confirmIdempotencyKey', 'confirm_idempotency_key'],
  ['confirmAttemptId', 'confirm_attempt_id'],
  ['transferIds', 'transfer_ids'],
  ['createdAt', 'created_at'],
  ['updatedAt', 'updated_at'],
];

/** Integer columns that hold user ids: bigint in SQL, number in the interface. */
const USER_ID_FIELDS = new Set<keyof Intent>(['userId', 'fromUserId', 'toUserId', 'issuedByUserId', 'redeemedByUserId']);

export const INTENT_SELECT = COLUMNS.map(([, column]) => column).join(', ');

export function toIntent(row: Record<string, unknown>): Intent {
  const intent: Record<string, unknown> = {};
  for (const [field, column] of COLUMNS) {
    const value = row[column];
    intent[field] = USER_ID_FIELDS.has(field) && typeof value === 'bigint' ? Number(value) : value;
  }
  return intent as unknown as Intent;
}

export type NewIntent = Omit<
  Intent,
  | 'createdAt'
  | 'updatedAt'
  | 'version'
  | 'canceledAt'
  | 'redeemedAt'
  | 'cancelReason'
  | 'redeemedByUserId'
  | 'confirmIdempotencyKey'
  | 'confirmAttemptId'
  | 'settlementDate'
>;

/** A new intent as a JSON row keyed by column, for `jsonb_populate_record(NULL::intents, …)`. */
export function newIntentRow(intent: NewIntent): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (const [field, column] of COLUMNS) {
    if (!(field in intent)) continue;
    const value = intent[field as keyof NewIntent];
    if (typeof value === 'bigint') row[column] = value.toString();
    else if (value instanceof Uint8Array) row[column] = `\\x${Buffer.from(value).toString('hex')}`;
    else row[column] = value;
  }
  return row;
}

/** Inserts unless the (idempotencyKey, serviceId) pair exists; null then. POST /intents goes through intent_open_batch instead. */
export async function insertIntent(sql: Sql, intent: NewIntent): Promise<{ createdAt: Date } | null> {
  const row = newIntentRow(intent);
  const columns = Object.keys(row).join(', ');
  const { rows } = await sql.query<{ created_at: Date }>(
    `INSERT INTO intents (${columns}) SELECT ${columns} FROM jsonb_populate_record(NULL::intents, $1::jsonb)
     ON CONFLICT (idempotency_key, service_id) DO NOTHING RETURNING created_at`,
    [JSON.stringify(row)],
  );
  return rows[0] === undefined ? null : { createdAt: rows[0].created_at };
}

/** Tenant isolation: another service's intent is indistinguishable from a missing one (404). */
export async function findOwnIntent(sql: Sql, serviceId: string, id: string): Promise<Intent> {
  const intent = await findIntent(sql, id);
  if (intent === null || intent.serviceId !== serviceId) throw apiError('NOT_FOUND', 'intent not found');
  return intent;
}

export async function findIntent(sql: Sql, id: string): Promise<Intent | null> {
  const { rows } = await sql.query(`SELECT ${INTENT_SELECT} FROM intents WHERE id = $1`, [id]);
  return rows[0] === undefined ? null : toIntent(rows[0]);
}

/** An intent by its id, read after the call (never from a cache), in a read shared with the calls that arrive together. */
export type IntentLookup = (id: string) => Promise<Intent | null>;

/** For an invoice's confirm, which reads its invoice before the batch that claims it. */
export function sharedIntentLookup(db: Database): IntentLookup {
  const reads = new CoalescedReads(async (ids: readonly string[]) => {
    const { rows } = await db.query(plannedEachCall(`SELECT ${INTENT_SELECT} FROM intents WHERE id = ANY($1::uuid[])`), [ids]);
    return new Map(rows.map((row) => [row.id as string, toIntent(row)]));
  }, departureFor(db));
  return async (id) => {
    // Anything but a plain UUID would fail the shared read's cast, and with it every caller's read.
    if (!isUuid(id)) return null;
    // The database answers a uuid in lower case: so is the key it is found under.
    const key = id.toLowerCase();
    return (await reads.load([key])).get(key) ?? null;
  };
}

export async function findIntentByKey(sql: Sql, serviceId: string, idempotencyKey: string): Promise<Intent | null> {
  const { rows } = await sql.query(`SELECT ${INTENT_SELECT} FROM intents WHERE idempotency_key = $1 AND service_id = $2`, [
    idempotencyKey,
    serviceId,
  ]);
  return rows[0] === undefined ? null : toIntent(rows[0]);
}

export interface Transition {
  readonly from: string | null;
  readonly to: string;
  readonly reason?: string | null;
  readonly payload?: Readonly<Record<string, unknown>> | null;
}

export interface IntentEvent {
  readonly id: number;
  readonly statusFrom: string | null;
  readonly statusTo: string;
  readonly reason: string | null;
  readonly payload: Record<string, unknown> | null;
  readonly createdAt: string;
}

export async function listEvents(sql: Sql, intentId: string): Promise<IntentEvent[]> {
  const { rows } = await sql.query<{
    id: bigint;
    status_from: string | null;
    status_to: string;
    reason: string | null;
    payload: Record<string, unknown> | null;
    created_at: Date;
  }>('SELECT id, status_from, status_to, reason, payload, created_at FROM intent_events WHERE intent_id = $1 ORDER BY created_at, id', [
    intentId,
  ]);
  return rows.map((row) => ({
    id: Number(row.id),
    statusFrom: row.status_from,
    statusTo: row.status_to,
    reason: row.reason,
    payload: row.payload,
    createdAt: row.created_at.toISOString(),
  }));
}

export interface HistoryRow {
  readonly accountName: string;
  readonly userId: number | null;
  readonly direction: 'DEBIT' | 'CREDIT';
  readonly amount: bigint;
  readonly feeAmount: bigint;
}

/** The two sides of each settled intent in the transaction history, one statement for them all. */
export async function insertHistory(
  sql: Sql,
  entries: readonly { readonly intent: Pick<Intent, 'id' | 'operationType' | 'currency'>; readonly rows: readonly HistoryRow[] }[],
): Promise<void> {
  const rows = entries.flatMap(({ intent, rows }) => rows.map((row) => ({ intent, row })));
  if (rows.length === 0) return;
  await sql.query(
    `INSERT INTO transactions (intent_id, account_name, user_id, operation_type, direction, amount, fee_amount, currency)
     SELECT h.intent_id, h.account_name, h.user_id, h.operation_type, h.direction, h.amount, h.fee_amount, h.currency
       FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::text[])
            AS h (intent_id, account_name, user_id, operation_type, direction, amount, fee_amount, currency)
     ON CONFLICT (intent_id, account_name, direction) WHERE refund_id IS NULL DO NOTHING`,
    [
      rows.map((r) => r.intent.id),
      rows.map((r) => r.row.accountName),
      rows.map((r) => r.row.userId),
      rows.map((r) => r.intent.operationType),
      rows.map((r) => r.row.direction),
      rows.map((r) => r.row.amount.toString()),
      rows.map((r) => r.row.feeAmount.toString()),
      rows.map((r) => r.intent.currency),
    ],
  );
}
