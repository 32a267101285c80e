import { describe, expect, it } from 'vitest';
import { CoalescedReads } from '../../src/adapters/coalesced-reads.js';

/** A store whose reads wait until released, recording the keys of each read. */
function slowStore() {
  const data = new Map<string, number>([
    ['a', 1],
    ['b', 2],
    ['c', 3],
  ]);
  const reads: string[][] = [];
  const pending: Array<() => void> = [];
  const read = async (keys: readonly string[]) => {
    reads.push([...keys]);
    // The value is read when the read runs, as a database answers as of its statement.
    const snapshot = new Map(keys.flatMap((key) => (data.has(key) ? [[key, data.get(key)!] as const] : [])));
    await new Promise<void>((resolve) => pending.push(resolve));
    return snapshot;
  };
  const release = async () => {
    for (const resolve of pending.splice(0)) resolve();
    for (let i = 0; i < 3; i += 1) await new Promise((resolve) => setImmediate(resolve));
  };
  return { data, reads, read, release };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('CoalescedReads', () => {
  it('sends the first read at once and one read for every caller that arrived meanwhile', async () => {
    const store = slowStore();
    const reads = new CoalescedReads(store.read);
    const first = reads.load(['a']);
    expect(store.reads).toEqual([['a']]);
    const second = reads.load(['b']);
    const third = reads.load(['b', 'c']);
    expect(store.reads).toHaveLength(1);
    await store.release();
    expect([...(await first)]).toEqual([['a', 1]]);
    expect(store.reads).toEqual([['a'], ['b', 'c']]);
    await store.release();
    expect((await second).get('b')).toBe(2);
    expect((await third).get('c')).toBe(3);
  });

  it("'end-of-turn': the callers of one event-loop turn share a read; those that arrive while it is on its way share the next", async () => {
    const store = slowStore();
    const reads = new CoalescedReads(store.read, 'end-of-turn');
    const first = reads.load(['a']);
    const sameTurn = reads.load(['a', 'b']);
    expect(store.reads).toEqual([]);
    await turn();
    expect(store.reads).toEqual([['a', 'b']]);
    const later = reads.load(['c']);
    await store.release();
    expect((await first).get('a')).toBe(1);
    expect((await sameTurn).get('b')).toBe(2);
    expect(store.reads).toEqual([['a', 'b'], ['c']]);
    await store.release();
    expect((await later).get('c')).toBe(3);
  });

  it('never answers a caller with a read sent before it asked', async () => {
    const store = slowStore();
    const reads = new CoalescedReads(store.read);
    const early = reads.load(['a']);
    store.data.set('a', 10); // committed after the first read left, before the second caller asks
    const late = reads.load(['a']);
    await store.release();
    expect((await early).get('a')).toBe(1);
    await store.release();
    expect((await late).get('a')).toBe(10);
  });

  it('a failed read fails its callers only; the next read goes out', async () => {
    let fail = true;
    const reads = new CoalescedReads(async (keys: readonly string[]) => {
      if (fail) throw new Error('database gone');
      return new Map(keys.map((key) => [key, key.length]));
    });
    await expect(reads.load(['a'])).rejects.toThrow('database gone');
    fail = false;
    expect((await reads.load(['abc'])).get('abc')).toBe(3);
  });
});
