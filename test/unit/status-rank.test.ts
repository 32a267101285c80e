import { describe, expect, it } from 'vitest';
import { ALLOWED_TRANSITIONS, STATUS_RANK } from '../../src/domain/intents/store/state-machine.js';
import { FINAL_STATUSES } from '../../src/domain/model.js';

describe('the status order, derived from the transition table', () => {
  it('climbs on every allowed step, so a late message about an earlier status is recognised', () => {
    for (const { from, to } of ALLOWED_TRANSITIONS) {
      if (from !== null) expect(STATUS_RANK[to], `${from} → ${to}`).toBeGreaterThan(STATUS_RANK[from]);
    }
  });

  it('places a payout the way it moves: created, validated, authorized, in review, then settled or failed', () => {
    expect(STATUS_RANK).toMatchObject({ CREATED: 0, VALIDATED: 1, AUTHORIZED: 2, MANUAL_REVIEW: 3, SETTLED: 4, FAILED: 4 });
    // Nothing moves out of a final status, and SETTLING (docs/rules.md R7) is on no trail.
    for (const status of FINAL_STATUSES) expect(ALLOWED_TRANSITIONS.some((t) => t.from === status)).toBe(false);
    expect(STATUS_RANK.SETTLING).toBe(-1);
  });
});
