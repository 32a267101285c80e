import { parse as parseUuid, v4, v5 } from 'uuid';
import { describe, expect, it } from 'vitest';
import { uuidV5 } from '../../src/ledger/uuid-v5.js';

describe('uuidV5', () => {
  it('answers what the uuid package answers, for any name up to its limit', () => {
    const names = ['', 'user.1.THB', 'ü✓ 漢字 🙂', 'x'.repeat(4_096), '漢'.repeat(4_096), ...Array.from({ length: 200 }, () => v4())];
    for (const name of names) {
      const namespace = parseUuid(v4());
      expect(uuidV5(namespace, name)).toBe(v5(name, namespace));
    }
  });

  it('refuses a name past its limit and a namespace that is not 16 bytes', () => {
    expect(() => uuidV5(parseUuid(v4()), 'x'.repeat(4_097))).toThrow();
    expect(() => uuidV5(new Uint8Array(15), 'x')).toThrow();
  });
});
