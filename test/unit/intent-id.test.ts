import { validate, version } from 'uuid';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { newIntentId } from '../../src/domain/intents/create/intent-id.js';

const millisecondOf = (id: string) => Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);

describe('newIntentId', () => {
  afterEach(() => vi.restoreAllMocks());

  it('answers UUID v7s of the current millisecond, each new, in the order made, past several refills of its random pool', () => {
    const before = Date.now();
    const ids = Array.from({ length: 5_000 }, () => newIntentId());
    const after = Date.now();
    for (const id of ids) {
      expect(validate(id) && version(id)).toBe(7);
      expect(millisecondOf(id)).toBeGreaterThanOrEqual(before);
    }
    expect(millisecondOf(ids.at(-1)!)).toBeLessThanOrEqual(after + 1);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('keeps counting up within a millisecond, and when the clock steps back', () => {
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(now + 60_000);
    const first = Array.from({ length: 100 }, () => newIntentId());
    clock.mockReturnValue(now + 59_000);
    const afterStepBack = Array.from({ length: 100 }, () => newIntentId());
    const ids = [...first, ...afterStepBack];
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids.map(millisecondOf))).toEqual(new Set([now + 60_000]));
  });
});
