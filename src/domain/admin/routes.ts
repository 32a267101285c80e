import { apiError } from '../errors.js';
import { type Channel, channelCarries } from '../model.js';
import { type AdminEntity, read } from './admin-entity.js';

/** docs/rules.md R20: the active route of lowest priority whose [minAmount, maxAmount] holds the amount wins. */
export interface RouteRecord {
  readonly id: number;
  readonly operationType: string;
  readonly minAmount: string;
  /** null: no upper bound. */
  readonly maxAmount: string | null;
  readonly channel: Channel;
  readonly priority: number;
  readonly active: boolean;
  readonly createdAt: string;
}

const decimal = (value: unknown) => String(value);

export const routes: AdminEntity<RouteRecord> = {
  entity: 'route',
  table: 'routes',
  keyColumn: 'id',
  columns: {
    operationType: { column: 'operation_type' },
    minAmount: { column: 'min_amount', encode: decimal },
    maxAmount: { column: 'max_amount', encode: decimal },
    channel: { column: 'channel' },
    priority: { column: 'priority' },
    active: { column: 'active' },
  },
  hasUpdatedAt: false,
  orderBy: 'id',
  fromRow: (row) => ({
    id: read.id(row.id),
    operationType: read.string(row.operation_type),
    minAmount: read.bigint(row.min_amount),
    maxAmount: row.max_amount === null ? null : read.bigint(row.max_amount),
    channel: read.string(row.channel) as Channel,
    priority: read.integer(row.priority),
    active: read.boolean(row.active),
    createdAt: read.timestamp(row.created_at),
  }),
  keyOf: (record) => String(record.id),
};

/** A route may only name a channel that can carry its operation type (422 otherwise). */
export function checkRoute(route: Pick<RouteRecord, 'operationType' | 'channel'>): void {
  if (!channelCarries(route.channel, route.operationType)) {
    throw apiError('VALIDATION_ERROR', `channel ${route.channel} cannot carry ${route.operationType} (docs/design.md, "Requests")`);
  }
}
