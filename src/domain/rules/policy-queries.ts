import assert from 'node:assert/strict';
import type { Database, Sql } from '../../adapters/database.js';
import { CoalescedReads, departureFor } from '../../adapters/coalesced-reads.js';
import type { AuthPolicy, PolicyFacts } from './policies.js';

/** The figures of a condition that are read from the database, not taken from the request (docs/rules.md R33). */
export type PayerFacts = Pick<PolicyFacts, 'dailyCumulative' | 'isNewPayee'>;

export type PayerFactsLookup = (userId: number, currency: string, merchantId: number | undefined) => Promise<PayerFacts>;

/**
 * Evaluations that arrive together share one statement (CoalescedReads): under load one round
 * trip answers every evaluation that arrived during the previous one, instead of a statement,
 * a socket write and a backend wake-up each (docs/design.md#hot-coalesced-reads). Each caller still sees the
 * database as of a moment after it asked.
 */
export function sharedPayerFacts(db: Database): PayerFactsLookup {
  const reads = new CoalescedReads((keys: readonly string[]) => readPayerFacts(db, keys), departureFor(db));
  return async (userId, currency, merchantId) => {
    const key = JSON.stringify([userId, currency, merchantId ?? null]);
    const facts = (await reads.load([key])).get(key);
    assert.ok(facts !== undefined, 'every key read gets its row');
    return facts;
  };
}

/**
 * History rows are written when an intent settles, one DEBIT row for the payer with the account
 * owner's user_id; ->> gives the same text for 42 and "42", so either spelling of merchantUserId
 * in metadata counts. Without a merchant there is no payee to be new (docs/rules.md R33).
 */
async function readPayerFacts(sql: Sql, keys: readonly string[]): Promise<Map<string, PayerFacts>> {
  const asked = keys.map((key) => JSON.parse(key) as [number, string, number | null]);
  const { rows } = await sql.query<{ key: string; total: string; paid_before: boolean | null }>(
    `SELECT k.key,
            (SELECT coalesce(sum(t.amount), 0)::text FROM transactions t
              WHERE t.user_id = k.user_id AND t.direction = 'DEBIT' AND t.currency = k.currency
                AND t.created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS total,
            CASE WHEN k.merchant IS NULL THEN NULL ELSE EXISTS (
              SELECT 1 FROM intents i
               WHERE i.status = 'SETTLED' AND i.from_user_id = k.user_id AND i.metadata->>'merchantUserId' = k.merchant) END AS paid_before
       FROM unnest($1::text[], $2::bigint[], $3::bpchar[], $4::text[]) AS k (key, user_id, currency, merchant)`,
    [
      keys,
      asked.map(([userId]) => userId),
      asked.map(([, currency]) => currency),
      asked.map(([, , merchantId]) => (merchantId === null ? null : String(merchantId))),
    ],
  );
  return new Map(rows.map((row) => [row.key, { dailyCumulative: BigInt(row.total), isNewPayee: row.paid_before === false }]));
}

/** The active policies of these scopes from a config snapshot: one list per scope, each in (priority, id) order, as decide() wants them. */
export function cachedPolicies(
  policies: ReadonlyMap<string, readonly AuthPolicy[]>,
  scopes: readonly string[],
): Array<readonly AuthPolicy[]> {
  return scopes.map((scope) => policies.get(scope) ?? []);
}
