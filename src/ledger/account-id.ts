import assert from 'node:assert/strict';
import { parse as parseUuid } from 'uuid';
import { uuidV5 } from './uuid-v5.js';

/** Fixed for ever: a new namespace would give every account a new ledger id. */
export const LEDGER_ACCOUNT_NAMESPACE = '3e7b4a1c-9f2d-5e8a-b6c3-4d1f07e2a9b5';
/** uuid parses a namespace given as text on every call. */
const NAMESPACE_BYTES = parseUuid(LEDGER_ACCOUNT_NAMESPACE);

/**
 * The ledger id of an account, derived from its name so that every instance (and a rebuild from
 * the names alone) arrives at the same id without a lookup.
 */
export function ledgerAccountId(accountName: string): string {
  assert.ok(accountName.length > 0, 'an account name must not be empty');
  return uuidV5(NAMESPACE_BYTES, accountName);
}
