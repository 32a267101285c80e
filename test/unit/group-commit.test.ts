import { describe, expect, it } from 'vitest';
import { CommitUnanswered } from '../../src/domain/intents/commit/commit-unanswered.js';
import { GroupCommit } from '../../src/domain/intents/commit/group-commit.js';

/** A flush that waits until released, recording each batch it was given. */
function gatedFlush(fail: (batch: readonly string[]) => boolean = () => false) {
  const batches: string[][] = [];
  const gates: Array<() => void> = [];
  const flush = async (batch: readonly string[]) => {
    batches.push([...batch]);
    await new Promise<void>((resolve) => gates.push(resolve));
    if (fail(batch)) throw new Error(`failed ${batch.join(',')}`);
    return batch.map((item) => `done ${item}`);
  };
  const releaseAll = async () => {
    for (let i = 0; i < 50 && (gates.length > 0 || i < 3); i += 1) {
      for (const open of gates.splice(0)) open();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return { flush, batches, releaseAll };
}

describe('GroupCommit', () => {
  it('commits the first item at once and the items that arrive meanwhile together', async () => {
    const { flush, batches, releaseAll } = gatedFlush();
    const group = new GroupCommit(flush, { batchMax: 10, flushesMax: 1 });
    const first = group.submit('a');
    expect(batches).toEqual([['a']]);
    const rest = ['b', 'c', 'd'].map((item) => group.submit(item));
    await releaseAll();
    expect(await first).toBe('done a');
    expect(await Promise.all(rest)).toEqual(['done b', 'done c', 'done d']);
    expect(batches).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('keeps batches within batchMax and runs up to flushesMax at once', async () => {
    const { flush, batches, releaseAll } = gatedFlush();
    const group = new GroupCommit(flush, { batchMax: 2, flushesMax: 2 });
    const all = ['a', 'b', 'c', 'd', 'e', 'f'].map((item) => group.submit(item));
    expect(batches).toEqual([['a'], ['b']]);
    await releaseAll();
    await Promise.all(all);
    expect(batches).toEqual([['a'], ['b'], ['c', 'd'], ['e', 'f']]);
  });

  it('never puts two items with a shared key in one batch, and commits them in the order they came', async () => {
    const { flush, batches, releaseAll } = gatedFlush();
    const keys: Record<string, string[]> = { x1: ['x'], x2: ['x'], y: ['y'], x3: ['x', 'z'], z: ['z'] };
    const group = new GroupCommit(flush, { batchMax: 10, flushesMax: 1, keysOf: (item: string) => keys[item] ?? [] });
    const all = ['first', 'x1', 'x2', 'y', 'x3', 'z', 'free'].map((item) => group.submit(item));
    await releaseAll();
    await Promise.all(all);
    expect(batches).toEqual([['first'], ['x1', 'y', 'free'], ['x2'], ['x3'], ['z']]);
  });

  it('holds an item back while a batch in flight has one of its lock keys, then lets those items share a batch', async () => {
    const { flush, batches, releaseAll } = gatedFlush();
    const lockKeys: Record<string, string[]> = { a1: ['a'], a2: ['a', 'c'], a3: ['a'] };
    const group = new GroupCommit(flush, { batchMax: 10, flushesMax: 2, lockKeysOf: (item: string) => lockKeys[item] ?? [] });
    const all = [group.submit('a1'), ...['a2', 'b', 'a3'].map((item) => group.submit(item))];
    // The second slot takes b alone; a2 and a3 wait for a1's batch, not in the database.
    expect(batches).toEqual([['a1'], ['b']]);
    await releaseAll();
    expect(await Promise.all(all)).toEqual(['done a1', 'done a2', 'done b', 'done a3']);
    expect(batches).toEqual([['a1'], ['b'], ['a2', 'a3']]);
  });

  it('releases the lock keys of a batch that failed, so the items held back by them still commit', async () => {
    const { flush, batches, releaseAll } = gatedFlush((batch) => batch.includes('bad'));
    const lockKeys: Record<string, string[]> = { bad: ['a'], a2: ['a'] };
    const group = new GroupCommit(flush, { batchMax: 10, flushesMax: 2, lockKeysOf: (item: string) => lockKeys[item] ?? [] });
    const failed = group.submit('bad').catch((error: Error) => error.message);
    const held = group.submit('a2');
    expect(batches).toEqual([['bad']]);
    await releaseAll();
    expect(await failed).toBe('failed bad');
    expect(await held).toBe('done a2');
    expect(batches).toEqual([['bad'], ['a2']]);
  });

  it('with gatherMs, waits that long before each batch, so that items arriving meanwhile join it', async () => {
    const { flush, batches, releaseAll } = gatedFlush();
    const group = new GroupCommit(flush, { batchMax: 10, flushesMax: 1, gatherMs: 20 });
    const first = [group.submit('a')];
    await new Promise((resolve) => setTimeout(resolve, 5));
    first.push(group.submit('b'));
    expect(batches).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(batches).toEqual([['a', 'b']]);
    // Items that come while a batch commits wait for it, then gather again before the next.
    const later = ['c', 'd'].map((item) => group.submit(item));
    await releaseAll();
    await new Promise((resolve) => setTimeout(resolve, 40));
    await releaseAll();
    expect(await Promise.all([...first, ...later])).toEqual(['done a', 'done b', 'done c', 'done d']);
    expect(batches).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
  });

  it('commits the items of a failed batch one by one: only the failing one is rejected', async () => {
    const { flush, batches, releaseAll } = gatedFlush((batch) => batch.includes('bad'));
    const group = new GroupCommit(flush, { batchMax: 10, flushesMax: 1 });
    const first = group.submit('a');
    const rest = ['b', 'bad', 'c'].map((item) => group.submit(item).catch((error: Error) => error.message));
    await releaseAll();
    await first;
    expect(await Promise.all(rest)).toEqual(['done b', 'failed bad', 'done c']);
    expect(batches).toEqual([['a'], ['b', 'bad', 'c'], ['b'], ['bad'], ['c']]);
  });

  it('after a batch whose COMMIT went unanswered, an item whose retry fails too says it may be stored all the same', async () => {
    const lostAnswer = new CommitUnanswered(new Error('Connection terminated unexpectedly'));
    const { flush, releaseAll } = gatedFlush();
    const group = new GroupCommit(
      async (batch: readonly string[]) => {
        if (batch.length > 1) throw lostAnswer;
        if (batch[0] === 'gone') throw new Error('connect ECONNREFUSED');
        return flush(batch);
      },
      { batchMax: 10, flushesMax: 1 },
    );
    const first = group.submit('first');
    const rest = ['a', 'gone'].map((item) => group.submit(item).catch((error: unknown) => error));
    await releaseAll();
    await first;
    const [a, gone] = await Promise.all(rest);
    expect(a).toBe('done a');
    expect(gone).toBeInstanceOf(CommitUnanswered);
    expect((gone as CommitUnanswered).cause).toEqual(new Error('connect ECONNREFUSED'));
  });
});
