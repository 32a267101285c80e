import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createMemorySharedState, createSharedState, MEMORY_CLAIMS_MAX, SharedStateFullError } from '../../src/adapters/shared-state.js';

// With REDIS_URL set (CI's second pass) two states on one Redis stand for two instances of the API.
const prefix = `payorch-test-${randomBytes(6).toString('hex')}:`;
const first = createSharedState(process.env.REDIS_URL, prefix);
const second = process.env.REDIS_URL === undefined ? first : createSharedState(process.env.REDIS_URL, prefix);

afterAll(async () => {
  await first.close();
  if (second !== first) await second.close();
});

describe('SharedState.claimOnce', () => {
  it('grants a key once within its time to live, on whichever instance claims it', async () => {
    expect(await first.claimOnce('sig-a', 5_000)).toBe(true);
    expect(await second.claimOnce('sig-a', 5_000)).toBe(false);
    expect(await first.claimOnce('sig-b', 5_000)).toBe(true);
  });

  it('grants exactly one of many concurrent claims of one key', async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? first : second).claimOnce('race', 5_000)));
    expect(answers.filter(Boolean)).toHaveLength(1);
  });

  it('grants a key again once its time to live has passed', async () => {
    expect(await first.claimOnce('short', 30)).toBe(true);
    expect(await first.claimOnce('short', 30)).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(await second.claimOnce('short', 30)).toBe(true);
  });

  it('refuses a claim past MEMORY_CLAIMS_MAX and never forgets a live one early (docs/rules.md R61)', async () => {
    const memory = createMemorySharedState();
    for (let i = 0; i < MEMORY_CLAIMS_MAX; i += 1) await memory.claimOnce(`k${i}`, 60_000);
    await expect(memory.claimOnce('one-more', 60_000)).rejects.toBeInstanceOf(SharedStateFullError);
    // The oldest claim is still there: its request cannot be replayed within its window.
    expect(await memory.claimOnce('k0', 60_000)).toBe(false);
    await memory.close();
  });

  it('takes claims again once the live ones expire', async () => {
    const memory = createMemorySharedState('', 2);
    expect(await memory.claimOnce('a', 30)).toBe(true);
    expect(await memory.claimOnce('b', 30)).toBe(true);
    await expect(memory.claimOnce('c', 30)).rejects.toBeInstanceOf(SharedStateFullError);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(await memory.claimOnce('c', 30)).toBe(true);
    await memory.close();
  });
});
