import type { Sql } from '../../../adapters/database.js';
import type { AccountLookup } from '../../accounts/accounts.js';
import { apiError } from '../../errors.js';
import { type FeeEngine, FeeEvaluationError, FeePoolBusyError, type FeeResult, type FeeRule } from '../../rules/fees/index.js';
import type { MoneyLeg } from '../money/money-path.js';
import { refusedSplitMessage, refusedSplitTarget } from '../../rules/fees/fee-split-targets.js';

/** Active rules of one operation type, read per request: a rule change applies to the next intent. */
export async function loadFeeRules(sql: Sql, operationType: string): Promise<FeeRule[]> {
  const { rows } = await sql.query<{
    id: bigint;
    name: string;
    operation_type: string;
    expression: string;
    timing: 'PRE' | 'POST';
    tags_include: string[];
    tags_exclude: string[];
    priority: number;
    active: boolean;
  }>(
    `SELECT id, name, operation_type, expression, timing, tags_include, tags_exclude, priority, active
       FROM fee_rules WHERE active AND operation_type = $1 ORDER BY priority, id`,
    [operationType],
  );
  return rows.map((row) => ({
    id: Number(row.id),
    name: row.name,
    operationType: row.operation_type,
    expression: row.expression,
    timing: row.timing,
    tagsInclude: row.tags_include,
    tagsExclude: row.tags_exclude,
    priority: row.priority,
    active: row.active,
  }));
}

/**
 * Fees of a request; a rule that fails for this input is the request's 422 EVAL_ERROR, never a 500.
 * `owner`: the service asking, for its fair share of the fee workers (docs/rules.md R61).
 * `cachedRules`: the active rules of this operation type from a config snapshot; absent, they are read.
 */
export async function calculateFees(
  sql: Sql,
  fees: FeeEngine,
  owner: string,
  context: { operationType: string; amount: bigint; currency: string; metadata: Readonly<Record<string, unknown>> },
  cachedRules?: readonly FeeRule[],
): Promise<FeeResult> {
  const rules = cachedRules ?? (await loadFeeRules(sql, context.operationType));
  let result: FeeResult;
  try {
    result = await fees.calculateFees(rules, context, owner);
  } catch (error) {
    if (error instanceof FeeEvaluationError) throw apiError('EVAL_ERROR', error.message);
    if (error instanceof FeePoolBusyError) throw apiError('SERVICE_UNAVAILABLE', error.message);
    throw error;
  }
  // A rule whose split depends on the input can still name one: 422 for the payment and its quote
  // alike, not the ledger's 500 at settlement (docs/rules.md R62).
  const refused = refusedSplitTarget(result.splits);
  if (refused !== undefined) throw apiError('EVAL_ERROR', refusedSplitMessage(refused));
  return result;
}

/**
 * The ledger ids of the fee accounts found so far, per lookup (one per service instance). An
 * account is never deleted and its ledger id never changes, so one found once is good for the
 * life of the process: a payment with a fee makes no read for its fee accounts, one shared read
 * fewer on the way to the commit of POST /intents. A name not found is looked up every time, so
 * a fee account created later is found at once.
 */
const feeAccountsFound = new WeakMap<AccountLookup, Map<string, string>>();

/** Every fee-split account must exist (422 ACCOUNT_NOT_FOUND); returns the ledger legs. `result` is calculateFees's, targets checked. */
export async function feeLegs(lookup: AccountLookup, result: FeeResult): Promise<MoneyLeg[]> {
  if (result.splits.length === 0) return [];
  let found = feeAccountsFound.get(lookup);
  if (found === undefined) {
    found = new Map();
    feeAccountsFound.set(lookup, found);
  }
  const unknown = [...new Set(result.splits.map((split) => split.account))].filter((name) => !found.has(name));
  if (unknown.length > 0) {
    // The shared read answers other requests' names too: only the ones asked for are kept.
    const accounts = await lookup(unknown);
    for (const name of unknown) {
      const account = accounts.get(name);
      if (account !== undefined) found.set(name, account.ledgerAccountId);
    }
  }
  return result.splits.map((split) => {
    const ledgerAccountId = found.get(split.account);
    if (ledgerAccountId === undefined) throw apiError('ACCOUNT_NOT_FOUND', `fee account ${split.account} does not exist`);
    return { ledgerAccountId, amount: split.amount };
  });
}
