import { type AdminEntity, read } from './admin-entity.js';

export const LIMIT_DIRECTIONS = ['DEBIT', 'CREDIT', 'BOTH'] as const;
export const LIMIT_WINDOWS = ['DAILY', 'MONTHLY', 'PER_TRANSACTION'] as const;
export const LIMIT_TYPES = ['AMOUNT', 'COUNT'] as const;

/** docs/rules.md R21. `limit` is satang for AMOUNT and a number of intents for COUNT; a decimal string either way. */
export interface LimitRuleRecord {
  readonly id: number;
  readonly name: string;
  /** '*' for every operation type. */
  readonly operationType: string;
  readonly direction: (typeof LIMIT_DIRECTIONS)[number];
  readonly window: (typeof LIMIT_WINDOWS)[number];
  readonly limitType: (typeof LIMIT_TYPES)[number];
  readonly limit: string;
  readonly currency: string;
  readonly active: boolean;
  readonly createdAt: string;
}

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
    direction: read.string(row.direction) as LimitRuleRecord['direction'],
    window: read.string(row.time_window) as LimitRuleRecord['window'],
    limitType: read.string(row.limit_type) as LimitRuleRecord['limitType'],
    limit: read.bigint(row.limit_value),
    currency: read.string(row.currency),
    active: read.boolean(row.active),
    createdAt: read.timestamp(row.created_at),
  }),
  keyOf: (record) => String(record.id),
};
