import type { Sql } from '../adapters/database.js';
import type { StepUpLevel } from './model.js';
import type { AuthPolicy } from './policies.js';

/** The three reads of a policy evaluation; nothing is cached, so an admin change applies to the next call. */

export async function loadActivePolicies(sql: Sql, scopes: readonly string[]): Promise<AuthPolicy[]> {
  const { rows } = await sql.query<{
    id: bigint;
    scope: string;
    condition: Record<string, unknown>;
    required_step_up: StepUpLevel;
    reason_code: string;
    priority: number;
  }>(
    `SELECT id, scope, condition, required_step_up, reason_code, priority
       FROM auth_policies WHERE active AND scope = ANY($1::text[]) ORDER BY priority, id`,
    [scopes],
  );
  return rows.map((row) => ({
    id: Number(row.id),
    scope: row.scope,
    condition: row.condition,
    requiredStepUp: row.required_step_up,
    reasonCode: row.reason_code,
    priority: row.priority,
  }));
}

/**
 * The user's settled debits since 00:00 UTC today in one currency (R33). History rows are
 * written when an intent settles, one DEBIT row for the payer with the account owner's user_id.
 */
export async function dailyDebitTotal(sql: Sql, userId: number, currency: string): Promise<bigint> {
  const { rows } = await sql.query<{ total: string }>(
    `SELECT coalesce(sum(amount), 0)::text AS total FROM transactions
      WHERE user_id = $1 AND direction = 'DEBIT' AND currency = $2
        AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`,
    [userId, currency],
  );
  return BigInt(rows[0]?.total ?? '0');
}

/** True when the user has no settled payment whose metadata.merchantUserId is this merchant. */
export async function isNewPayee(sql: Sql, userId: number, merchantId: number): Promise<boolean> {
  // ->> gives the same text for 42 and "42", so either spelling in metadata counts.
  const { rowCount } = await sql.query(
    `SELECT 1 FROM intents
      WHERE status = 'SETTLED' AND from_user_id = $1 AND metadata->>'merchantUserId' = $2 LIMIT 1`,
    [userId, String(merchantId)],
  );
  return rowCount === 0;
}

/**
 * dailyDebitTotal and isNewPayee in one statement: one round trip per evaluation instead of two.
 * merchantId undefined: no payee to be new (R33), isNewPayee is false.
 */
export async function policyFacts(
  sql: Sql,
  userId: number,
  currency: string,
  merchantId: number | undefined,
): Promise<{ dailyCumulative: bigint; isNewPayee: boolean }> {
  const { rows } = await sql.query<{ total: string; paid_before: boolean | null }>(
    `SELECT (SELECT coalesce(sum(amount), 0)::text FROM transactions
              WHERE user_id = $1 AND direction = 'DEBIT' AND currency = $2
                AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS total,
            CASE WHEN $3::text IS NULL THEN NULL ELSE EXISTS (
              SELECT 1 FROM intents
               WHERE status = 'SETTLED' AND from_user_id = $1 AND metadata->>'merchantUserId' = $3::text) END AS paid_before`,
    [userId, currency, merchantId === undefined ? null : String(merchantId)],
  );
  const row = rows[0];
  return { dailyCumulative: BigInt(row?.total ?? '0'), isNewPayee: merchantId !== undefined && row?.paid_before === false };
}

/** The active policies of these scopes from a config snapshot, in (priority, id) order as decide() wants them. */
export function cachedPolicies(policies: ReadonlyMap<string, readonly AuthPolicy[]>, scopes: readonly string[]): AuthPolicy[] {
  return scopes.flatMap((scope) => policies.get(scope) ?? []);
}
