import assert from 'node:assert/strict';
import type { CompiledExpression, FeeSandbox } from './sandbox.js';

export const COMPILED_RULES_MAX_DEFAULT = 1_000;

/**
 * Compiled fee expressions keyed by (rule id, expression text). Rules are loaded from the
 * database per request; this keeps each one compiled once. One entry per rule id: when a
 * rule's expression changes, the stale compilation is freed and replaced. The least recently
 * used entry is evicted beyond `entriesMax`, so deleted rules do not pin sandbox memory.
 */
export class CompiledRuleCache {
  /** Map order is use order: the first key is the least recently used. */
  private readonly entries = new Map<number, CompiledExpression>();

  constructor(
    private readonly sandbox: FeeSandbox,
    private readonly entriesMax: number = COMPILED_RULES_MAX_DEFAULT,
  ) {
    assert.ok(Number.isInteger(entriesMax) && entriesMax > 0, 'entriesMax must be a positive integer');
  }

  get size(): number {
    return this.entries.size;
  }

  /** Throws FeeEvaluationError('syntax') for an expression that does not compile; nothing is cached then. */
  get(ruleId: number, expression: string): CompiledExpression {
    const cached = this.entries.get(ruleId);
    if (cached !== undefined) {
      this.entries.delete(ruleId);
      if (cached.expression === expression) {
        this.entries.set(ruleId, cached);
        return cached;
      }
      cached.dispose();
    }
    const compiled = this.sandbox.compile(expression);
    this.entries.set(ruleId, compiled);
    this.evictBeyondLimit();
    return compiled;
  }

  clear(): void {
    for (const compiled of this.entries.values()) compiled.dispose();
    this.entries.clear();
  }

  private evictBeyondLimit(): void {
    for (const [ruleId, compiled] of this.entries) {
      if (this.entries.size <= this.entriesMax) return;
      this.entries.delete(ruleId);
      compiled.dispose();
    }
  }
}
