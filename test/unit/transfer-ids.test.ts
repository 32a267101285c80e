import { v4, v7, validate, version } from 'uuid';
import { describe, expect, it } from 'vitest';
import { transferId } from '../../src/domain/intents/money/money-path.js';

describe('transfer ids', () => {
  it('name the same transfer for the same step of the same intent, and differ between steps and intents', () => {
    const intent = v7();
    expect(transferId(intent, 'reserve')).toBe(transferId(intent, 'reserve'));
    const ids = new Set(['reserve', 'post', 'credit', 'void', 'fee/a', 'fee/b'].map((step) => transferId(intent, step)));
    expect(ids.size).toBe(6);
    expect(transferId(v7(), 'reserve')).not.toBe(transferId(intent, 'reserve'));
  });

  it('are valid version 5 UUIDs that start with the intent id’s 48-bit time, so they sort like the intents', () => {
    const older = v7({ msecs: Date.parse('2026-11-22T00:00:00Z') });
    const newer = v7({ msecs: Date.parse('2026-11-22T00:00:01Z') });
    for (const intent of [older, newer, v4()]) {
      const id = transferId(intent, 'post');
      expect(validate(id)).toBe(true);
      expect(version(id)).toBe(5);
      expect(id.replaceAll('-', '').slice(0, 12)).toBe(intent.replaceAll('-', '').slice(0, 12));
    }
    expect(transferId(older, 'void') < transferId(newer, 'reserve')).toBe(true);
  });
});
