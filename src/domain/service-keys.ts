import type { Sql } from '../adapters/database.js';
import type { Permissions } from './admin/service-keys.js';

export interface ServiceKey {
  readonly serviceId: string;
  readonly active: boolean;
  readonly permissions: Permissions;
}

/** Read on every request, never cached: a deactivated key is refused on the very next call. */
export async function findServiceKey(sql: Sql, serviceId: string): Promise<ServiceKey | null> {
  const { rows } = await sql.query<{ service_id: string; active: boolean; permissions: Permissions }>(
    'SELECT service_id, active, permissions FROM service_keys WHERE service_id = $1',
    [serviceId],
  );
  const row = rows[0];
  return row === undefined ? null : { serviceId: row.service_id, active: row.active, permissions: row.permissions };
}
