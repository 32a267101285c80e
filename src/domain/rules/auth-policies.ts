import Type, { type Static } from 'typebox';
import { STEP_UP_LEVELS } from '../model.js';
import { Currency } from '../wire-types.js';
import { type AdminEntity, read } from '../admin/admin-entity.js';
import { ActiveField, inputSchemas, priorityField, RecordId, Timestamp } from '../admin/record-schema.js';

/** Known keys are type-checked; other keys are stored and ignored by evaluation (docs/rules.md, Step-up policies). */
const Condition = Type.Object(
  {
    amount_lt: Type.Optional(Type.Number()),
    amount_gte: Type.Optional(Type.Number()),
    amount_lte: Type.Optional(Type.Number()),
    currency: Type.Optional(Currency),
    daily_cumulative_gte: Type.Optional(Type.Number()),
    new_payee: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true, description: 'all present keys must hold (AND); {} (default) matches everything' },
);
export type PolicyCondition = Static<typeof Condition>;

const authPolicyFields = {
  scope: Type.String({
    maxLength: 80,
    pattern: '^(global|app:.{1,50}|merchant:[1-9][0-9]{0,15})$',
    description: "'global', 'app:{appId}' or 'merchant:{merchantId}'",
  }),
  condition: Condition,
  requiredStepUp: Type.Enum(STEP_UP_LEVELS),
  reasonCode: Type.String({ minLength: 1, maxLength: 50 }),
  priority: priorityField('ascending, default 100'),
  active: ActiveField,
};

/** The create and PATCH bodies of /admin/auth-policies; the create body is also a CONFIG_FILE `authPolicies` entry. */
export const AuthPolicyInputs = inputSchemas(authPolicyFields, ['scope', 'requiredStepUp', 'reasonCode']);
export type AuthPolicyInput = Static<typeof AuthPolicyInputs.create>;

export const AuthPolicy = Type.Object({ id: RecordId, ...authPolicyFields, createdAt: Timestamp, updatedAt: Timestamp });
export type AuthPolicyRecord = Readonly<Static<typeof AuthPolicy>>;

export const authPolicies: AdminEntity<AuthPolicyRecord> = {
  entity: 'auth-policy',
  table: 'auth_policies',
  keyColumn: 'id',
  columns: {
    scope: { column: 'scope' },
    condition: { column: 'condition', cast: '::jsonb', encode: (value) => JSON.stringify(value) },
    requiredStepUp: { column: 'required_step_up' },
    reasonCode: { column: 'reason_code' },
    priority: { column: 'priority' },
    active: { column: 'active' },
  },
  hasUpdatedAt: true,
  orderBy: 'id',
  fromRow: (row) => ({
    id: read.id(row.id),
    scope: read.string(row.scope),
    condition: read.object(row.condition),
    requiredStepUp: read.member(row.required_step_up, STEP_UP_LEVELS),
    reasonCode: read.string(row.reason_code),
    priority: read.integer(row.priority),
    active: read.boolean(row.active),
    createdAt: read.timestamp(row.created_at),
    updatedAt: read.timestamp(row.updated_at),
  }),
  keyOf: (record) => String(record.id),
};
