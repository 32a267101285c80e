import Type, { type Static } from 'typebox';
import { OPERATION_TYPES, type OperationType } from '../../model.js';
import { AccountName, CurrencyOrDefault, DEFAULT_CURRENCY, Uuid, UuidV4 } from '../../wire-types.js';

const PositiveAmount = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'satang' });
const Metadata = Type.Record(Type.String(), Type.Unknown(), { description: 'default {}' });

/** POST /intents (BaseIntentBody, docs/rules.md, Operation table): the schema of the route, of the client's request type and of the domain's. */
export const IntentBody = Type.Object(
  {
    idempotencyKey: UuidV4,
    operationType: Type.Enum(OPERATION_TYPES),
    amount: PositiveAmount,
    currency: Type.Optional(CurrencyOrDefault),
    metadata: Type.Optional(Metadata),
    fromAccountName: Type.Optional(AccountName),
    toAccountName: Type.Optional(AccountName),
    toLedgerAccountId: Type.Optional(Uuid),
    fromName: Type.Optional(Type.String({ maxLength: 255 })),
    toName: Type.Optional(Type.String({ maxLength: 255 })),
    comment: Type.Optional(Type.String({ maxLength: 500 })),
    live: Type.Optional(Type.Boolean()),
    externalRef: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    recipientUserId: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
  },
  { additionalProperties: false },
);
export type IntentInput = Static<typeof IntentBody>;

/** POST /intents/quote: the fee part of an intent body (NFC_CHARGE has no quote). */
export const QuoteBody = Type.Object(
  {
    operationType: Type.Enum(OPERATION_TYPES.filter((type) => type !== 'NFC_CHARGE')),
    amount: PositiveAmount,
    currency: Type.Optional(CurrencyOrDefault),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);
export type QuoteInput = Static<typeof QuoteBody>;

/** An intent body with its defaults in place: what the domain works on. */
export type IntentRequest = Readonly<IntentInput & { currency: string; metadata: Readonly<Record<string, unknown>> }>;

/** The defaults of an intent or quote body, set here rather than by the schema so the types say they are set. */
export const withBodyDefaults = <T extends { readonly currency?: string; readonly metadata?: Readonly<Record<string, unknown>> }>(
  input: T,
) => ({
  ...input,
  currency: input.currency ?? DEFAULT_CURRENCY,
  metadata: input.metadata ?? {},
});

export const intentRequest = (input: IntentInput): IntentRequest => withBodyDefaults(input);

export type BodyField = 'recipientUserId' | 'toLedgerAccountId' | 'externalRef' | 'fromAccountName' | 'toAccountName';

/** Body rules of the operation table (docs/rules.md): fields each type requires or forbids. */
interface BodyRule {
  readonly required: readonly BodyField[];
  readonly forbidden: readonly BodyField[];
  /** One of these must be present. */
  readonly oneOf?: readonly BodyField[];
}

export const BODY_RULES: Readonly<Record<OperationType, BodyRule>> = {
  P2P_TRANSFER: { required: [], forbidden: ['externalRef'], oneOf: ['recipientUserId', 'toLedgerAccountId', 'toAccountName'] },
  PSPX_WITHDRAWAL: { required: [], forbidden: [] },
  THAI_QR_PAY: { required: [], forbidden: [] },
  WITHDRAWAL: { required: ['externalRef'], forbidden: ['recipientUserId'] },
  QP_TOPUP: { required: [], forbidden: [] },
  MINIAPP_CHARGE: { required: [], forbidden: ['recipientUserId', 'externalRef'] },
  MINIAPP_CREDIT: { required: [], forbidden: ['externalRef'] },
  SERVICE_DEPOSIT: { required: [], forbidden: [] },
  ADMIN_TRANSFER: { required: ['fromAccountName', 'toAccountName'], forbidden: [] },
  INVOICE_PAYMENT: { required: ['toLedgerAccountId'], forbidden: ['recipientUserId'] },
  NFC_CHARGE: { required: ['fromAccountName', 'toAccountName'], forbidden: ['recipientUserId', 'toLedgerAccountId', 'externalRef'] },
};

/** Why a body breaks the operation's rules, or null. Each answer is a 400 BAD_REQUEST (docs/rules.md R28). */
export function bodyRuleViolation(request: IntentRequest): string | null {
  const rule = BODY_RULES[request.operationType];
  const present = (field: BodyField) => request[field] !== undefined;
  for (const field of rule.forbidden) {
    if (present(field)) return `${field} is not allowed for ${request.operationType}`;
  }
  for (const field of rule.required) {
    if (!present(field)) return `${field} is required for ${request.operationType}`;
  }
  if (rule.oneOf !== undefined && !rule.oneOf.some(present)) {
    return `${request.operationType} requires ${rule.oneOf.join(' or ')}`;
  }
  return metadataViolation(request);
}

const isPositiveInteger = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

function metadataViolation(request: IntentRequest): string | null {
  const m = request.metadata;
  if (m.tags !== undefined && (!Array.isArray(m.tags) || !m.tags.every((tag) => typeof tag === 'string'))) {
    return 'metadata.tags must be an array of strings';
  }
  switch (request.operationType) {
    case 'MINIAPP_CHARGE':
      if (!isPositiveInteger(m.customerUserId)) return 'metadata.customerUserId (integer > 0) is required for MINIAPP_CHARGE';
      if (m.merchantId !== undefined && !isPositiveInteger(m.merchantId)) return 'metadata.merchantId must be an integer > 0';
      return null;
    case 'MINIAPP_CREDIT':
      if (!isPositiveInteger(m.customerUserId)) return 'metadata.customerUserId (integer > 0) is required for MINIAPP_CREDIT';
      if (!isPositiveInteger(m.merchantId)) return 'metadata.merchantId (integer > 0) is required for MINIAPP_CREDIT';
      return null;
    case 'SERVICE_DEPOSIT':
      if (!isPositiveInteger(m.recipientUserId)) return 'metadata.recipientUserId (integer > 0) is required for SERVICE_DEPOSIT';
      return null;
    case 'NFC_CHARGE':
      if (typeof m.nfcTagId !== 'number' || !Number.isSafeInteger(m.nfcTagId)) return 'metadata.nfcTagId must be an integer';
      if (m.lat !== undefined && typeof m.lat !== 'number') return 'metadata.lat must be a number';
      if (m.lon !== undefined && typeof m.lon !== 'number') return 'metadata.lon must be a number';
      return null;
    case 'INVOICE_PAYMENT':
      return invoiceMetadataViolation(m);
    default:
      return null;
  }
}

function invoiceMetadataViolation(m: Readonly<Record<string, unknown>>): string | null {
  if (m.appScope !== undefined && !['w', 'c', 'a'].includes(m.appScope as string)) return 'metadata.appScope must be one of w, c, a';
  if (m.note !== undefined && (typeof m.note !== 'string' || m.note.length > 500))
    return 'metadata.note must be a string of at most 500 characters';
  if (m.posTerminalId !== undefined && (typeof m.posTerminalId !== 'string' || m.posTerminalId.length > 100)) {
    return 'metadata.posTerminalId must be a string of at most 100 characters';
  }
  if (m.ttlSeconds !== undefined && !isPositiveInteger(m.ttlSeconds)) return 'metadata.ttlSeconds must be an integer > 0';
  if (m.qrIssuedAt !== undefined && (typeof m.qrIssuedAt !== 'string' || Number.isNaN(Date.parse(m.qrIssuedAt)))) {
    return 'metadata.qrIssuedAt must be an ISO 8601 timestamp';
  }
  return null;
}

/** docs/rules.md R14: what decides whether a reused idempotency key asks for the same payment. */
export function requestFingerprint(request: IntentRequest, actorUserId: number): string {
  const m = request.metadata;
  return JSON.stringify([
    request.operationType,
    request.amount,
    request.currency,
    actorUserId,
    request.recipientUserId ?? null,
    request.toLedgerAccountId?.toLowerCase() ?? null,
    request.fromAccountName ?? null,
    request.toAccountName ?? null,
    m.customerUserId ?? null,
    m.merchantId ?? null,
    m.recipientUserId ?? null,
  ]);
}
