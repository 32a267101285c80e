import type { Sql } from '../../adapters/database.js';
import type { ConfigFile } from './config-file.js';
import { recordChange } from '../admin/change-log.js';

/**
 * One owner per setting (docs/rules.md R67). A service key named in CONFIG_FILE is the file's to
 * seed and the database's to keep: the admin API's changes survive every restart. The file wins
 * again only when its own entry for that key changed since it was last applied; that overwrite is
 * logged by the caller and recorded in admin_changes with the actor `CONFIG_FILE`.
 */

/** The actor of admin_changes rows written by the start, not by an administrator. */
export const CONFIG_FILE_ACTOR = 'CONFIG_FILE';
const ENTITY = 'service-key';

export type ServiceKeyDecision =
  /** Absent from the database: created from the file. */
  | { readonly kind: 'seeded'; readonly serviceId: string }
  /** The file's entry changed since it was last applied and the database held something else: overwritten. */
  | { readonly kind: 'overwritten'; readonly serviceId: string }
  /**
   * Present, and no record of the file's entry having been applied (a database older than this rule, or a
   * key the admin API created first): the database's value is kept and the file's entry is remembered.
   */
  | { readonly kind: 'kept'; readonly serviceId: string };

interface KeyRow {
  readonly active: boolean;
  readonly permissions: unknown;
  /** The stored key holds exactly the file's entry (jsonb equality: key order and spacing do not count). */
  readonly same: boolean;
  readonly applied_hash: string | null;
  readonly file_hash: string;
}

export async function applyServiceKeys(tx: Sql, file: ConfigFile): Promise<ServiceKeyDecision[]> {
  const decisions: ServiceKeyDecision[] = [];
  for (const key of file.serviceKeys) {
    const serviceId = key.serviceId;
    const entry = { active: key.active ?? true, permissions: key.permissions };
    // jsonb's text form is canonical, so the fingerprint does not change with the file's formatting.
    const { rows } = await tx.query<KeyRow>(
      `SELECT k.active, k.permissions, (k.active = $2 AND k.permissions = $3::jsonb) AS same, a.file_hash AS applied_hash,
              md5(jsonb_build_object('active', $2::boolean, 'permissions', $3::jsonb)::text) AS file_hash
         FROM (SELECT 1) AS one
         LEFT JOIN service_keys k ON k.service_id = $1
         LEFT JOIN config_file_applied a ON a.entity = '${ENTITY}' AND a.entity_id = $1`,
      [serviceId, entry.active, JSON.stringify(entry.permissions)],
    );
    const row = rows[0] as KeyRow;
    const stored = row.active === null ? null : { active: row.active, permissions: row.permissions };
    if (row.applied_hash === row.file_hash && stored !== null) continue;
    await tx.query(
      `INSERT INTO config_file_applied (entity, entity_id, file_hash) VALUES ('${ENTITY}', $1, $2)
       ON CONFLICT (entity, entity_id) DO UPDATE SET file_hash = EXCLUDED.file_hash, applied_at = now()`,
      [serviceId, row.file_hash],
    );
    if (stored === null) {
      await writeKey(tx, serviceId, null, entry);
      decisions.push({ kind: 'seeded', serviceId });
    } else if (row.same) {
      // Nothing to write: the file and the database agree, the fingerprint is now remembered.
    } else if (row.applied_hash === null) {
      decisions.push({ kind: 'kept', serviceId });
    } else {
      await writeKey(tx, serviceId, stored, entry);
      decisions.push({ kind: 'overwritten', serviceId });
    }
  }
  return decisions;
}

interface KeyEntry {
  readonly active: boolean;
  readonly permissions: unknown;
}

/** Writes the file's entry and its admin_changes row in the start's transaction. */
async function writeKey(tx: Sql, serviceId: string, before: KeyEntry | null, entry: KeyEntry): Promise<void> {
  await tx.query(
    `INSERT INTO service_keys (service_id, active, permissions) VALUES ($1, $2, $3::jsonb)
     ON CONFLICT (service_id) DO UPDATE SET active = EXCLUDED.active, permissions = EXCLUDED.permissions, updated_at = now()`,
    [serviceId, entry.active, JSON.stringify(entry.permissions)],
  );
  const action = before === null ? 'create' : 'update';
  await recordChange(tx, { actor: CONFIG_FILE_ACTOR, entity: ENTITY, entityId: serviceId, action, before, after: entry });
}

/** The log line of each decision: an overwrite is a warning, since it replaces what an administrator may have set. */
export function logServiceKeyDecisions(
  log: { info(bindings: object, message: string): void; warn(bindings: object, message: string): void },
  decisions: readonly ServiceKeyDecision[],
): void {
  for (const decision of decisions) {
    const bindings = { event: `config_file_service_key_${decision.kind}`, serviceId: decision.serviceId };
    if (decision.kind === 'seeded') log.info(bindings, `service key ${decision.serviceId} created from CONFIG_FILE`);
    if (decision.kind === 'kept')
      log.info(
        bindings,
        `service key ${decision.serviceId} differs from CONFIG_FILE and the database's value is kept (docs/rules.md R67): the file's entry is applied when it changes`,
      );
    if (decision.kind === 'overwritten')
      log.warn(
        bindings,
        `service key ${decision.serviceId}: its CONFIG_FILE entry changed, and it replaced the database's value (admin_changes records the one before)`,
      );
  }
}
