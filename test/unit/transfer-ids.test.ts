import { parse as parseUuid, stringify as stringifyUuid, v4, v5, v7, validate, version } from 'uuid';
import { describe, expect, it } from 'vitest';
import { transferId } from '../../src/domain/intents/money/money-path.js';
import { LEDGER_ACCOUNT_NAMESPACE } from '../../src/ledger/account-id.js';

/** The construction every stored transfer was named by: the uuid package's v5, the intent's 48-bit time in front. */
function namedByUuidPackage(intentId: string, step: string): string {
  const id = v5(Buffer.from(`${intentId}/${step}`), parseUuid(v5('payorch.transfers', LEDGER_ACCOUNT_NAMESPACE)), new Uint8Array(16));
  id.set(parseUuid(intentId).subarray(0, 6), 0);
  return stringifyUuid(id);
}

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

  it('are the ids the uuid package gave, so a retried step of a stored intent names the same transfer', () => {
    for (let i = 0; i < 500; i++) {
      const intent = i % 2 === 0 ? v7() : v4().toUpperCase();
      for (const step of ['reserve', 'post', 'credit', 'void', `fee/${v4()}`, 'fee/ü✓']) {
        expect(transferId(intent, step)).toBe(namedByUuidPackage(intent, step));
      }
    }
  });

  it('refuse an intent id that is not a UUID', () => {
    expect(() => transferId('not-a-uuid', 'reserve')).toThrow();
  });
});
