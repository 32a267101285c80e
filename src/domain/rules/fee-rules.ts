import Type, { type Static } from 'typebox';
import { EXPRESSION_LENGTH_MAX } from './fees/sandbox.js';
import { FEE_TIMINGS } from './fees/fee-rule.js';
import { OPERATION_TYPES } from '../model.js';
import { type AdminEntity, read } from '../admin/admin-entity.js';
import { ActiveField, inputSchemas, NameField, priorityField, RecordId, StoredOperationType, Timestamp } from '../admin/record-schema.js';

const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 50 }), { maxItems: 50 });

const feeRuleFields = {
  name: NameField,
  operationType: Type.Enum(OPERATION_TYPES),
  expression: Type.String({ minLength: 1, maxLength: EXPRESSION_LENGTH_MAX, description: 'returns [{account, amount}]' }),
  timing: Type.Enum(FEE_TIMINGS, { description: 'default PRE' }),
  tagsInclude: Tags,
  tagsExclude: Tags,
  priority: priorityField('ascending, default 0'),
  active: ActiveField,
};

/** The create and PATCH bodies of /admin/fee-rules; the create body is also a CONFIG_FILE `feeRules` entry. */
export const FeeRuleInputs = inputSchemas(feeRuleFields, ['name', 'operationType', 'expression']);
export type FeeRuleInput = Static<typeof FeeRuleInputs.create>;

export const FeeRule = Type.Object({ id: RecordId, ...feeRuleFields, operationType: StoredOperationType, createdAt: Timestamp });
export type FeeRuleRecord = Readonly<Static<typeof FeeRule>>;

export const feeRules: AdminEntity<FeeRuleRecord> = {
  entity: 'fee-rule',
  table: 'fee_rules',
  keyColumn: 'id',
  columns: {
    name: { column: 'name' },
    operationType: { column: 'operation_type' },
    expression: { column: 'expression' },
    timing: { column: 'timing' },
    tagsInclude: { column: 'tags_include', cast: '::text[]' },
    tagsExclude: { column: 'tags_exclude', cast: '::text[]' },
    priority: { column: 'priority' },
    active: { column: 'active' },
  },
  hasUpdatedAt: false,
  orderBy: 'id',
  fromRow: (row) => ({
    id: read.id(row.id),
    name: read.string(row.name),
    operationType: read.string(row.operation_type),
    expression: read.string(row.expression),
    timing: read.member(row.timing, FEE_TIMINGS),
    tagsInclude: read.strings(row.tags_include),
    tagsExclude: read.strings(row.tags_exclude),
    priority: read.integer(row.priority),
    active: read.boolean(row.active),
    createdAt: read.timestamp(row.created_at),
  }),
  keyOf: (record) => String(record.id),
};
