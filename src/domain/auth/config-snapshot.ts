import type { FeeRule } from '../rules/fees/index.js';
import type { LimitRule } from '../rules/limits.js';
import type { AuthPolicy } from '../rules/policies.js';
import type { RouteRow } from '../rules/routing.js';
import type { ServiceKeyGrant } from './service-keys.js';

/**
 * Configuration that every request reads and that changes rarely: service keys, routes, fee
 * rules, limit rules and auth policies, as of one `config_version` (sql/config/01-config-version.sql). Immutable.
 */
export interface ConfigSnapshot {
  readonly version: bigint;
  readonly serviceKeys: ReadonlyMap<string, ServiceKeyGrant>;
  /** Active routes in docs/rules.md R20 order (priority, id). */
  readonly routes: readonly RouteRow[];
  /** Active fee rules per operation type, in (priority, id) order. */
  readonly feeRules: ReadonlyMap<string, readonly FeeRule[]>;
  /** Active limit rules in id order. */
  readonly limitRules: readonly LimitRule[];
  /** Active auth policies per scope, in (priority, id) order. */
  readonly policies: ReadonlyMap<string, readonly AuthPolicy[]>;
}

const NO_FEE_RULES: readonly FeeRule[] = [];

export const feeRulesOf = (snapshot: ConfigSnapshot, operationType: string): readonly FeeRule[] =>
  snapshot.feeRules.get(operationType) ?? NO_FEE_RULES;
