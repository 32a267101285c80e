import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LEDGER_ACCOUNT_NAMESPACE, ledgerAccountId } from '../../src/ledger/account-id.js';

interface Vectors {
  ledgerNamespace: string;
  ledgerIds: { accountName: string; ledgerAccountId: string }[];
}

// Computed by an independent implementation: a mismatch means accounts would move to new ids.
const vectors = JSON.parse(await readFile(fileURLToPath(new URL('../vectors.json', import.meta.url)), 'utf8')) as Vectors;

describe('ledgerAccountId', () => {
  it('uses the namespace the vectors were computed with', () => {
    expect(LEDGER_ACCOUNT_NAMESPACE).toBe(vectors.ledgerNamespace);
  });

  it('has vectors to check', () => {
    expect(vectors.ledgerIds.length).toBeGreaterThan(0);
  });

  it.each(vectors.ledgerIds)('maps $accountName to $ledgerAccountId', ({ accountName, ledgerAccountId: expected }) => {
    expect(ledgerAccountId(accountName)).toBe(expected);
  });

  it('refuses an empty name', () => {
    expect(() => ledgerAccountId('')).toThrow();
  });
});
