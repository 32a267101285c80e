import Type, { type Static } from 'typebox';
import { LIMIT_DIRECTIONS, LIMIT_TYPES, LIMIT_WINDOWS } from '@payorch/client';
import { OPERATION_TYPES } from '../model.js';
import { CurrencyOrDefault } from '../wire-types.js';
import { type AdminEntity, read } from '../admin/admin-entity.js';
import { ActiveField, inputSchemas, NameField, RecordId, StoredOperationType, Timestamp } from '../admin/record-schema.js';

const limitRuleFields = {
  name: NameField,
  operationType: Type.Enum(['*', ...OPERATION_TYPES], { description: "'*' (default) is every operation type" }),
  direction: Type.Enum(LIMIT_DIRECTIONS),
  window: Type.Enum(LIMIT_WINDOWS),
  limitType: Type.Enum(LIMIT_TYPES),
  limit: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'satang for AMOUNT, intents for COUNT' }),
  currency: CurrencyOrDefault,
  active: ActiveField,
};

/** The create and PATCH bodies of /admin/limit-rules; the create body is also a CONFIG_FILE `limitRules` entry. */
export const LimitRuleInputs = inputSchemas(limitRuleFields, ['name', 'direction', 'window', 'limitType', 'limit']);
export type LimitRuleInput = Static<typeof LimitRuleInputs.create>;

/** `limit` is satang for AMOUNT and a number of intents for COUNT; a decimal string either way. */
export const LimitRule = Type.Object({
  id: RecordId,
  ...limitRuleFields,
  operationType: StoredOperationType,
  limit: Type.String({ pattern: '^[0-9]+$', description: 'satang for AMOUNT, intents for COUNT, as a decimal string' }),
  createdAt: Timestamp,
});
export type LimitRuleRecord = Readonly<Static<typeof LimitRule>>;

export const limitRules: AdminEntity<LimitRuleRecord> = {
  entity: 'limit-rule',
  table: 'limit_rules',
  keyColumn: 'id',
  columns: {
    name: { column: 'name' },
    operationType: { column: 'operation_type' },
    direction: { column: 'direction' },
    window: { column: 'time_window' },
    limitType: { column: 'limit_type' },
    limit: { column: 'limit_value', encode: (value) => String(value) },
    currency: { column: 'currency' },
    active: { column: 'active' },
  },
  hasUpdatedAt: false,
  orderBy: 'id',
  fromRow: (row) => ({
    id: read.id(row.id),
    name: read.string(row.name),
    operationType: read.string(row.operation_type),
    direction: read.member(row.direction, LIMIT_DIRECTIONS),
    window: read.member(row.time_window, LIMIT_WINDOWS),
    limitType: read.member(row.limit_type, LIMIT_TYPES),
    limit: read.bigint(row.limit_value),
    currency: read.string(row.currency),
    active: read.boolean(row.active),
    createdAt: read.timestamp(row.created_at),
  }),
  keyOf: (record) => String(record.id),
};
