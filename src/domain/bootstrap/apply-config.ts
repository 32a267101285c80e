import type { Database, Sql } from '../../adapters/database.js';
import type { Ledger } from '../../ledger/ledger.js';
import { SYSTEM_ACCOUNTS } from '../accounts/account-names.js';
import { createAccount } from '../accounts/accounts.js';
import type { ConfigFile } from './config-file.js';

/**
 * Brings a migrated database to the state the config describes (docs/rules.md, CONFIG_FILE): system
 * accounts and config accounts exist, service keys are upserted, and rule tables are seeded only
 * when empty, so that changes made through the admin API survive a restart.
 */
export async function applyConfig(db: Database, ledger: Ledger, file: ConfigFile): Promise<void> {
  await db.transaction(async (tx) => {
    for (const account of SYSTEM_ACCOUNTS) await createAccount(tx, ledger, { ...account, userId: null });
    for (const account of file.accounts ?? []) {
      await createAccount(tx, ledger, { name: account.accountName, type: account.accountType, userId: account.userId ?? null });
    }
    for (const key of file.serviceKeys) {
      await tx.query(
        `INSERT INTO service_keys (service_id, active, permissions) VALUES ($1, $2, $3)
         ON CONFLICT (service_id) DO UPDATE SET active = EXCLUDED.active, permissions = EXCLUDED.permissions, updated_at = now()`,
        [key.serviceId, key.active ?? true, JSON.stringify(key.permissions)],
      );
    }
    await seedRules(tx, file);
  });
}

async function isEmpty(sql: Sql, table: string): Promise<boolean> {
  const { rowCount } = await sql.query(`SELECT 1 FROM ${table} LIMIT 1`);
  return rowCount === 0;
}

async function seedRules(tx: Sql, file: ConfigFile): Promise<void> {
  if (await isEmpty(tx, 'routes')) {
    for (const r of file.routes ?? []) {
      await tx.query(
        'INSERT INTO routes (operation_type, min_amount, max_amount, channel, priority, active) VALUES ($1, $2, $3, $4, $5, $6)',
        [r.operationType, r.minAmount ?? 1, r.maxAmount ?? null, r.channel, r.priority ?? 0, r.active ?? true],
      );
    }
  }
  if (await isEmpty(tx, 'fee_rules')) {
    for (const f of file.feeRules ?? []) {
      await tx.query(
        `INSERT INTO fee_rules (name, operation_type, expression, timing, tags_include, tags_exclude, priority, active)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [
          f.name,
          f.operationType,
          f.expression,
          f.timing ?? 'PRE',
          f.tagsInclude ?? [],
          f.tagsExclude ?? [],
          f.priority ?? 0,
          f.active ?? true,
        ],
      );
    }
  }
  if (await isEmpty(tx, 'limit_rules')) {
    for (const l of file.limitRules ?? []) {
      await tx.query(
        `INSERT INTO limit_rules (name, operation_type, direction, time_window, limit_type, limit_value, currency, active)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [l.name, l.operationType ?? '*', l.direction, l.window, l.limitType, l.limit, l.currency ?? 'THB', l.active ?? true],
      );
    }
  }
  if (await isEmpty(tx, 'auth_policies')) {
    for (const p of file.authPolicies ?? []) {
      await tx.query(
        `INSERT INTO auth_policies (scope, condition, required_step_up, reason_code, priority, active)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [p.scope, JSON.stringify(p.condition), p.requiredStepUp, p.reasonCode, p.priority ?? 100, p.active ?? true],
      );
    }
  }
}
