import type { Sql } from '../../adapters/database.js';
import type { LimitRuleRecord } from './limit-rules.js';
import { apiError } from '../errors.js';

/** The vocabulary of limit rules, in the client package once: the record schema (domain/rules/limit-rules.ts) enumerates these. */
import type { LimitDirection, LimitType, LimitWindow } from '@payorch/client';

export { LIMIT_DIRECTIONS, LIMIT_TYPES, LIMIT_WINDOWS, type LimitDirection, type LimitType, type LimitWindow } from '@payorch/client';

/** An active rule as enforcement reads it: the stored record with its limit as a bigint. */
export type LimitRule = Readonly<Omit<LimitRuleRecord, 'limit' | 'active' | 'createdAt'> & { limit: bigint }>;

export interface LimitSubject {
  readonly operationType: string;
  readonly amount: bigint;
  readonly currency: string;
  /** Owners of the two accounts; a side without an owner is not limited (docs/rules.md R21). */
  readonly fromUserId: number | null;
  readonly toUserId: number | null;
}

function windowStart(window: LimitWindow, now: Date): Date | null {
  switch (window) {
    case 'DAILY':
      return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
    case 'MONTHLY':
      return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    case 'PER_TRANSACTION':
      return null;
  }
}

/** Active rules of one operation type (or '*') and currency, in id order. */
export async function loadLimitRules(sql: Sql, operationType: string, currency: string): Promise<LimitRule[]> {
  const { rows } = await sql.query<{
    id: bigint;
    name: string;
    operation_type: string;
    direction: LimitDirection;
    time_window: LimitWindow;
    limit_type: LimitType;
    limit_value: bigint;
    currency: string;
  }>(
    `SELECT id, name, operation_type, direction, time_window, limit_type, limit_value, currency FROM limit_rules
      WHERE active AND (operation_type = '*' OR operation_type = $1) AND currency = $2 ORDER BY id`,
    [operationType, currency],
  );
  return rows.map((row) => ({
    id: Number(row.id),
    name: row.name,
    operationType: row.operation_type,
    direction: row.direction,
    window: row.time_window,
    limitType: row.limit_type,
    limit: row.limit_value,
    currency: row.currency,
  }));
}

/** The rules of a cached set that apply to this subject, in id order (the cache keeps every active rule). */
export const applicableLimitRules = (rules: readonly LimitRule[], subject: Pick<LimitSubject, 'operationType' | 'currency'>) =>
  rules.filter(
    (rule) => (rule.operationType === '*' || rule.operationType === subject.operationType) && rule.currency === subject.currency,
  );

/** One usage comparison: the rule's usage on one side of the payment, in the rule's unit. */
export interface LimitCheck {
  readonly rule: LimitRule;
  readonly side: 'from' | 'to';
  readonly userId: number;
  /** null: PER_TRANSACTION, nothing before this request counts. */
  readonly since: Date | null;
  readonly requested: bigint;
}

/** Every comparison docs/rules.md R21 asks for, in the order the first breach is reported: rule id, then DEBIT side first. */
export function limitChecks(rules: readonly LimitRule[], subject: LimitSubject, now: Date): LimitCheck[] {
  if (subject.fromUserId === null && subject.toUserId === null) return [];
  return rules.flatMap((rule) => {
    const sides: Array<'from' | 'to'> = rule.direction === 'DEBIT' ? ['from'] : rule.direction === 'CREDIT' ? ['to'] : ['from', 'to'];
    return sides.flatMap((side) => {
      const userId = side === 'from' ? subject.fromUserId : subject.toUserId;
      if (userId === null) return [];
      const requested = rule.limitType === 'AMOUNT' ? subject.amount : 1n;
      return [{ rule, side, userId, since: windowStart(rule.window, now), requested }];
    });
  });
}

/** 422 LIMIT_EXCEEDED naming the rule, the usage before this request and its own contribution (docs/rules.md R32). */
export function limitExceeded(check: LimitCheck, current: bigint) {
  const { rule } = check;
  return apiError('LIMIT_EXCEEDED', `limit rule ${rule.name} exceeded`, {
    detail: {
      ruleName: rule.name,
      window: rule.window,
      limitType: rule.limitType,
      limit: rule.limit.toString(),
      current: current.toString(),
      requested: check.requested.toString(),
    },
  });
}
