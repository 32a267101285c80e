import type { FeeTiming } from '../fees/index.js';
import { type AdminEntity, read } from './admin-entity.js';

export interface FeeRuleRecord {
  readonly id: number;
  readonly name: string;
  readonly operationType: string;
  readonly expression: string;
  readonly timing: FeeTiming;
  readonly tagsInclude: string[];
  readonly tagsExclude: string[];
  readonly priority: number;
  readonly active: boolean;
  readonly createdAt: string;
}

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
    timing: read.string(row.timing) as FeeTiming,
    tagsInclude: read.strings(row.tags_include),
    tagsExclude: read.strings(row.tags_exclude),
    priority: read.integer(row.priority),
    active: read.boolean(row.active),
    createdAt: read.timestamp(row.created_at),
  }),
  keyOf: (record) => String(record.id),
};
