import type { Permissions } from '../../config.js';
import { apiError } from '../errors.js';
import { type AdminEntity, read } from './admin-entity.js';

/** The key record only: secrets live in CONFIG_FILE and memory, never here (docs/rules.md, Key records). */
export interface ServiceKeyRecord {
  readonly serviceId: string;
  readonly active: boolean;
  readonly permissions: Permissions;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export const serviceKeys: AdminEntity<ServiceKeyRecord> = {
  entity: 'service-key',
  table: 'service_keys',
  keyColumn: 'service_id',
  columns: {
    serviceId: { column: 'service_id' },
    active: { column: 'active' },
    permissions: { column: 'permissions', cast: '::jsonb', encode: (value) => JSON.stringify(value) },
  },
  hasUpdatedAt: true,
  orderBy: 'service_id',
  fromRow: (row) => ({
    serviceId: read.string(row.service_id),
    active: read.boolean(row.active),
    permissions: read.object(row.permissions) as Permissions,
    createdAt: read.timestamp(row.created_at),
    updatedAt: read.timestamp(row.updated_at),
  }),
  keyOf: (record) => record.serviceId,
};

/** The override patterns are used as regular expressions on every intent; refuse one that is not. */
export function checkPermissions(permissions: Permissions): void {
  for (const side of ['fromAccountOverride', 'toAccountOverride'] as const) {
    const pattern = permissions[side]?.namePattern;
    if (pattern === undefined) continue;
    try {
      new RegExp(pattern);
    } catch {
      throw apiError('VALIDATION_ERROR', `body.permissions.${side}.namePattern: is not a regular expression`);
    }
  }
}
