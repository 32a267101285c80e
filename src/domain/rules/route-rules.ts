import Type, { type Static } from 'typebox';
import { apiError } from '../errors.js';
import { CHANNELS, OPERATION_TYPES } from '../model.js';
import { channelCarries } from '../channels/channels.js';
import { Money } from '../wire-types.js';
import { type AdminEntity, read } from '../admin/admin-entity.js';
import { ActiveField, amountField, inputSchemas, priorityField, RecordId, StoredOperationType, Timestamp } from '../admin/record-schema.js';

const routeFields = {
  operationType: Type.Enum(OPERATION_TYPES),
  minAmount: amountField('satang, default 1'),
  maxAmount: Type.Union([amountField('satang'), Type.Null()], { description: 'null (default) is unbounded' }),
  channel: Type.Enum(CHANNELS),
  priority: priorityField('ascending: the first route holding the amount wins; default 0'),
  active: ActiveField,
};

/** The create and PATCH bodies of /admin/routes; the create body is also a CONFIG_FILE `routes` entry. */
export const RouteInputs = inputSchemas(routeFields, ['operationType', 'channel']);
export type RouteInput = Static<typeof RouteInputs.create>;

/** The active route of lowest priority whose [minAmount, maxAmount] holds the amount wins (docs/rules.md R20). */
export const Route = Type.Object({
  id: RecordId,
  ...routeFields,
  operationType: StoredOperationType,
  minAmount: Money,
  maxAmount: Type.Union([Money, Type.Null()], { description: 'null: no upper bound' }),
  createdAt: Timestamp,
});
export type RouteRecord = Readonly<Static<typeof Route>>;

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
    channel: read.member(row.channel, CHANNELS),
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
