import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { qrSignature } from '../../src/domain/intents/create/create-intent.js';

const vectors = JSON.parse(readFileSync(new URL('../vectors.json', import.meta.url), 'utf8')) as {
  qrSignatures: Array<{ secret: string; input: string; qrSignature: string }>;
};

/** The input line of docs/rules.md R16 taken apart again, so the vector drives the function's own arguments. */
function parts(input: string) {
  const [intentId, amount, currency, toAccountName, expiresAt] = input.split('|');
  if (intentId === undefined || amount === undefined || currency === undefined || toAccountName === undefined || expiresAt === undefined) {
    throw new Error(`malformed vector input ${input}`);
  }
  return { intentId, amount: BigInt(amount), currency, toAccountName, expiresAt: new Date(expiresAt) };
}

describe('invoice qrSignature (docs/rules.md R16)', () => {
  it.each(vectors.qrSignatures)('matches the independent vector $qrSignature', (v) => {
    const p = parts(v.input);
    const signature = qrSignature(v.secret, p.intentId, p.amount, p.currency, p.toAccountName, p.expiresAt);
    expect(signature).toHaveLength(16);
    expect(signature.toString('base64url')).toBe(v.qrSignature);
  });

  it('is the first 16 bytes of HMAC-SHA256 over the pipe-joined fields, base64url without padding', () => {
    const expiresAt = new Date('2030-01-02T03:04:05.678Z');
    const signature = qrSignature('k', 'id-1', 500n, 'THB', 'merchant.9.THB', expiresAt).toString('base64url');
    const expected = createHmac('sha256', 'k')
      .update('id-1|500|THB|merchant.9.THB|2030-01-02T03:04:05.678Z')
      .digest()
      .subarray(0, 16)
      .toString('base64url');
    expect(signature).toBe(expected);
    expect(signature).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it('changes with every signed field', () => {
    const base: [string, bigint, string, string, Date] = ['id-1', 500n, 'THB', 'merchant.9.THB', new Date('2030-01-02T03:04:05.678Z')];
    const sign = (...args: typeof base) => qrSignature('k', ...args).toString('base64url');
    const reference = sign(...base);
    expect(sign('id-2', base[1], base[2], base[3], base[4])).not.toBe(reference);
    expect(sign(base[0], 501n, base[2], base[3], base[4])).not.toBe(reference);
    expect(sign(base[0], base[1], 'USD', base[3], base[4])).not.toBe(reference);
    expect(sign(base[0], base[1], base[2], 'merchant.8.THB', base[4])).not.toBe(reference);
    expect(sign(base[0], base[1], base[2], base[3], new Date('2030-01-02T03:04:05.679Z'))).not.toBe(reference);
    expect(qrSignature('other', ...base).toString('base64url')).not.toBe(reference);
  });
});
