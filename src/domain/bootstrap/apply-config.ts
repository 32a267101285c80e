import type { Database, Sql } from '../../adapters/database.js';
import type { Ledger } from '../../ledger/ledger.js';
import { SYSTEM_ACCOUNTS } from '../accounts/account-names.js';
import { createAccount } from '../accounts/accounts.js';
import { ApiError } from '../errors.js';
import { checkFeeExpression } from '../rules/fee-expression-check.js';
import { createLocalFeeEngine } from '../rules/fees/index.js';
import type { ConfigFile } from './config-file.js';
import { applyServiceKeys, type ServiceKeyDecision } from './service-key-owner.js';

export type { ServiceKeyDecision } from './service-key-owner.js';

/**
 * Brings a migrated database to the state the config describes (docs/rules.md, CONFIG_FILE): system
 * accounts and config accounts exist, service keys are seeded when absent and overwritten only when
 * their CONFIG_FILE entry itself changed (docs/rules.md R67), and rule tables are seeded only when
 * empty, so that changes made through the admin API survive a restart. Returns what it decided
 * about service keys, for the caller to log once its logger exists.
 */
export async function applyConfig(db: Database, ledger: Ledger, file: ConfigFile): Promise<ServiceKeyDecision[]> {
  return db.transaction(async (tx) => {
    // Processes that start together (an api and a workers process) apply the file one after the other.
    await tx.query("SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/payorch.config-file', 0))");
    for (const account of SYSTEM_ACCOUNTS) await createAccount(tx, ledger, { ...account, userId: null });
    for (const account of file.accounts ?? []) {
      await createAccount(tx, ledger, { name: account.accountName, type: account.accountType, userId: account.userId ?? null });
    }
    const decisions = await applyServiceKeys(tx, file);
    await seedRules(tx, file);
    return decisions;
  });
}

/**
 * The same trial run the admin API gives a new rule (docs/rules.md R62): a rule that fails every
 * payment, or pays a TRANSIT or NOSTRO account, stops the start instead of being seeded. On this
 * thread's own sandbox: the file is the operator's, and the fee workers do not exist yet.
 */
async function checkFeeRules(file: ConfigFile): Promise<void> {
  const rules = file.feeRules ?? [];
  if (rules.length === 0) return;
  const engine = await createLocalFeeEngine();
  try {
    for (const [index, rule] of rules.entries()) {
      const subject = { expression: rule.expression, operationType: rule.operationType, tagsInclude: rule.tagsInclude ?? [] };
      await checkFeeExpression(engine, subject).catch((error: unknown) => {
        if (!(error instanceof ApiError)) throw error;
        throw new Error(`CONFIG_FILE feeRules[${index}] (${rule.name}): ${error.message.replace(/^body\.expression: /, '')}`);
      });
    }
  } finally {
    engine.dispose();
  }
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
    await checkFeeRules(file);
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
