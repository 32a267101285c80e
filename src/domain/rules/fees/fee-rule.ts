import type { FeeTiming } from '@payorch/client';

export { FEE_TIMINGS, type FeeTiming } from '@payorch/client';

/** A fee rule as stored (docs/rules.md, Fee rules); createdAt is left to the persistence layer. */
export type FeeRule = {
  readonly id: number;
  readonly name: string;
  readonly operationType: string;
  readonly expression: string;
  /** PRE: charged to the sender on top of the amount; POST: taken from the receiver. */
  readonly timing: FeeTiming;
  readonly tagsInclude: readonly string[];
  readonly tagsExclude: readonly string[];
  readonly priority: number;
  readonly active: boolean;
};

/**
 * The tags of an operation: metadata.tags when it is an array of strings, else none. A
 * malformed `tags` value is treated as "no tags" rather than an error, so it can neither
 * satisfy a tagsInclude filter nor trip a tagsExclude one.
 */
export function metadataTags(metadata: Readonly<Record<string, unknown>>): ReadonlySet<string> {
  const tags = metadata.tags;
  if (!Array.isArray(tags) || !tags.every((tag): tag is string => typeof tag === 'string')) return new Set();
  return new Set(tags);
}

/**
 * Whether a rule takes part in a calculation. `fee_exempt` has no meaning here (docs/rules.md R31): the
 * shipped rules list it in tagsExclude like any other tag.
 */
export function ruleApplies(rule: FeeRule, timing: FeeTiming, operationType: string, tags: ReadonlySet<string>): boolean {
  return (
    rule.active &&
    rule.timing === timing &&
    rule.operationType === operationType &&
    rule.tagsInclude.every((tag) => tags.has(tag)) &&
    !rule.tagsExclude.some((tag) => tags.has(tag))
  );
}

/** Ascending priority, then ascending id, so equal priorities still order deterministically. */
export function compareRules(a: FeeRule, b: FeeRule): number {
  return a.priority - b.priority || a.id - b.id;
}
