import Type from 'typebox';
import { AUDIT_CHECKS } from '../../domain/audit/audit.js';
import { RESOLUTIONS } from '../../domain/intents/money/resolve-intent.js';
import { OUTBOX_KINDS } from '../../domain/intents/store/outbox-jobs.js';
import { INTENT_STATUSES } from '../../domain/model.js';
import { ChannelSchema, Currency, IntentStatusSchema, OperationTypeSchema } from '../../domain/wire-types.js';
import { RefundView } from '../../domain/refunds/refund-store.js';
import { IntentEventView } from './intents.js';
import { HistoryEntry, Money, NullableTimestamp, Timestamp, Uuid } from './shared.js';

/**
 * Schemas of the admin API that belong to no record: keys, list pages and the process switches.
 * The records' own schemas live with each record in domain/ (rules/, auth/service-keys.ts).
 */

export const IdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });

/** Admin tables hold configuration, not traffic: one page is normally all of it. */
export const LIST_PAGE_MAX = 500;
export const ListQuery = Type.Object(
  {
    active: Type.Optional(Type.Boolean({ description: 'only active (true) or inactive (false) records' })),
    limit: Type.Integer({ minimum: 1, maximum: LIST_PAGE_MAX, default: LIST_PAGE_MAX }),
    offset: Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 0 }),
  },
  { additionalProperties: false },
);

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LogLevelBody = Type.Object({ level: Type.Enum(LOG_LEVELS) }, { additionalProperties: false });
export const LogLevelResponse = Type.Object({
  level: Type.String(),
  previous: Type.Optional(Type.String()),
});
export const ReloadResponse = Type.Object({ services: Type.Integer({ description: 'services with at least one secret' }) });

/** Responses of the admin API's own routes (accounts, audit, intents, resolve). */

const NullableString = Type.Union([Type.String(), Type.Null()]);

export const AdminAccount = Type.Object({
  accountName: Type.String(),
  ledgerAccountId: Uuid,
  accountType: Type.String(),
  userId: Type.Union([Type.Integer(), Type.Null()]),
  currency: Currency,
  balance: Money,
  transactions: Type.Array(HistoryEntry),
});

const AuditViolation = Type.Object(
  {
    check: Type.Enum(AUDIT_CHECKS, { description: 'the name of the invariant that does not hold' }),
    detail: Type.String(),
    intentId: Type.Optional(Uuid),
    account: Type.Optional(Type.String({ description: 'account name' })),
  },
  { additionalProperties: false },
);

export const AuditResponse = Type.Object(
  {
    ok: Type.Boolean({ description: 'true when no violation was found' }),
    checkedAt: Timestamp,
    violations: Type.Immutable(Type.Array(AuditViolation)),
  },
  { additionalProperties: false },
);

/** Everything an operator needs to find and judge an intent; secrets of the invoice (qrSignature) stay out. */
export const AdminIntent = Type.Object({
  intentId: Uuid,
  serviceId: Type.String(),
  idempotencyKey: Uuid,
  userId: Type.Integer(),
  operationType: OperationTypeSchema,
  channel: ChannelSchema,
  status: IntentStatusSchema,
  pspState: NullableString,
  amount: Money,
  currency: Currency,
  preFeeAmount: Money,
  postFeeAmount: Money,
  fromAccount: NullableString,
  toAccount: Type.String(),
  externalRef: NullableString,
  failureReason: NullableString,
  cancelReason: NullableString,
  settlementDate: NullableString,
  metadata: Type.Record(Type.String(), Type.Unknown()),
  version: Type.Integer(),
  expiresAt: NullableTimestamp,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const AdminIntentPage = Type.Object({ intents: Type.Array(AdminIntent), nextCursor: NullableString });

/** An intent's refunds for the operator, with the sum of the SETTLED ones (what GET /intents/{id} calls refundedAmount). */
export const AdminRefunds = Type.Object({ refundedAmount: Money, refunds: Type.Array(RefundView) });

/** What the console may know before its operator signs in: never a secret, only whether one is set. */
export const ConsoleStatus = Type.Object({
  adminTokenConfigured: Type.Boolean({ description: 'whether the server was started with ADMIN_TOKEN; the token itself is never exposed' }),
});

export const AdminIntentWithEvents = Type.Object({ ...AdminIntent.properties, events: Type.Array(IntentEventView) });

export const ResolveBody = Type.Object(
  {
    resolution: Type.Enum(RESOLUTIONS),
    /** With FAILED: the intent's failureReason; with CONFIRMED: recorded in the audit row. */
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
  },
  { additionalProperties: false },
);

export const ResolveResponse = Type.Object({
  intentId: Uuid,
  previousStatus: Type.Enum(INTENT_STATUSES),
  status: Type.Enum(INTENT_STATUSES, {
    description: 'after the call; CONFIRMED stays MANUAL_REVIEW until the queued post_pending job settles it',
  }),
  resolution: Type.Enum(RESOLUTIONS),
  queuedJob: Type.Union([Type.Enum(OUTBOX_KINDS), Type.Null()], {
    description: 'the outbox job that finishes the resolution; null when nothing changed',
  }),
});
