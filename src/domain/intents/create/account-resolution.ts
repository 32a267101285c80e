import type { Permissions } from '../../auth/service-keys.js';
import { matchesWholeName } from '../../auth/name-pattern.js';
import { parseAccountName, pspxNostroAccountName, userWalletName } from '../../accounts/account-names.js';
import { type AccountLookup, type AccountRecord, lookupAccount } from '../../accounts/accounts.js';
import { apiError } from '../../errors.js';
import { assertNever } from '../../errors.js';
import type { AccountType } from '../../model.js';
import type { IntentRequest } from './intent-request.js';

/**
 * What toLedgerAccountId may name: a wallet that receives payments. Every other account (transit,
 * revenue, nostro, equity, settlement, service) is moved only by the operation table or by an
 * override with its own permission (docs/SECURITY.md §6).
 */
const LEDGER_ID_TARGET_TYPES: readonly AccountType[] = ['USER_WALLET', 'MERCHANT_WALLET', 'AGENT_WALLET'];

export interface ResolvedAccounts {
  /** null only for an invoice before its confirm. */
  readonly from: AccountRecord | null;
  readonly to: AccountRecord;
}

const metadataUserId = (request: IntentRequest, key: string) => request.metadata[key] as number;

/** The operation table (docs/rules.md): default account names, before overrides. */
function defaultNames(request: IntentRequest, actor: number): { from: string | null; to: string | null } {
  const cur = request.currency;
  const pspxNostro = pspxNostroAccountName(cur);
  switch (request.operationType) {
    case 'P2P_TRANSFER':
      return {
        from: userWalletName(actor, cur),
        to: request.recipientUserId === undefined ? null : userWalletName(request.recipientUserId, cur),
      };
    case 'PSPX_WITHDRAWAL':
    case 'THAI_QR_PAY':
    case 'WITHDRAWAL':
      return { from: userWalletName(actor, cur), to: pspxNostro };
    case 'QP_TOPUP':
      return { from: pspxNostro, to: userWalletName(actor, cur) };
    case 'MINIAPP_CHARGE': {
      const merchant = (request.metadata.merchantId as number | undefined) ?? actor;
      return { from: userWalletName(metadataUserId(request, 'customerUserId'), cur), to: userWalletName(merchant, cur) };
    }
    case 'MINIAPP_CREDIT':
      return {
        from: userWalletName(metadataUserId(request, 'merchantId'), cur),
        to: userWalletName(metadataUserId(request, 'customerUserId'), cur),
      };
    case 'SERVICE_DEPOSIT':
      return { from: `service.${actor}.${cur}`, to: userWalletName(metadataUserId(request, 'recipientUserId'), cur) };
    case 'ADMIN_TRANSFER':
    case 'NFC_CHARGE':
      return { from: null, to: null };
    case 'INVOICE_PAYMENT':
      return { from: null, to: null };
    default:
      return assertNever(request.operationType);
  }
}

/** 403 unless the key may name this account on this side; 400 when the name follows no pattern. */
function checkOverride(permissions: Permissions, side: 'from' | 'to', name: string): void {
  const parsed = parseAccountName(name);
  if (parsed === null) throw apiError('BAD_REQUEST', `${side}AccountName ${name} is not a resolvable account name`);
  const override = side === 'from' ? permissions.fromAccountOverride : permissions.toAccountOverride;
  if (override === undefined) throw apiError('FORBIDDEN', `${side}AccountName needs the ${side}AccountOverride permission`);
  const allowedTypes: readonly string[] = override.allowedTypes;
  if (!allowedTypes.includes(parsed.accountType) || !matchesWholeName(override.namePattern, name)) {
    throw apiError('FORBIDDEN', `${side}AccountName ${name} is outside the ${side}AccountOverride permission`);
  }
}

/** Permission checks of the override fields (403), before any body rule is looked at. */
export function checkOverridePermissions(request: IntentRequest, permissions: Permissions): void {
  if (request.fromAccountName !== undefined) checkOverride(permissions, 'from', request.fromAccountName);
  if (request.toAccountName !== undefined) checkOverride(permissions, 'to', request.toAccountName);
  if (request.toLedgerAccountId !== undefined && permissions.allowToLedgerAccountId !== true) {
    throw apiError('FORBIDDEN', 'toLedgerAccountId needs the allowToLedgerAccountId permission');
  }
}

/**
 * Names from the operation table, replaced by overrides; both must exist in the account map
 * (422 ACCOUNT_NOT_FOUND), and a name that follows no account pattern is a 400.
 */
export async function resolveAccounts(lookup: AccountLookup, request: IntentRequest, actor: number): Promise<ResolvedAccounts> {
  const defaults = defaultNames(request, actor);
  const fromName = request.fromAccountName ?? defaults.from;
  let to: AccountRecord | null = null;
  if (request.toLedgerAccountId !== undefined && request.toAccountName === undefined) {
    to = await lookupAccount(lookup, request.toLedgerAccountId);
    if (to === null) throw apiError('ACCOUNT_NOT_FOUND', `no account with ledger id ${request.toLedgerAccountId}`);
    if (!LEDGER_ID_TARGET_TYPES.includes(to.accountType)) {
      throw apiError('FORBIDDEN', 'toLedgerAccountId must name a user, merchant or agent wallet');
    }
  }
  const toName = to?.accountName ?? request.toAccountName ?? defaults.to;
  if (toName === null) throw apiError('BAD_REQUEST', `${request.operationType} needs a destination account`);
  const needsFrom = request.operationType !== 'INVOICE_PAYMENT';
  if (needsFrom && fromName === null) throw apiError('BAD_REQUEST', `${request.operationType} needs a source account`);
  for (const name of [fromName, toName]) {
    if (name !== null && parseAccountName(name) === null) throw apiError('BAD_REQUEST', `account name ${name} is not resolvable`);
  }
  const names = [toName, ...(needsFrom && fromName !== null ? [fromName] : [])];
  // Found by its ledger id above, the destination is not read again by its name (an invoice's issue).
  const found = to !== null && names.length === 1 ? new Map([[toName, to]]) : await lookup(names);
  for (const name of names) {
    if (!found.has(name)) throw apiError('ACCOUNT_NOT_FOUND', `account ${name} does not exist`);
  }
  const from = needsFrom && fromName !== null ? (found.get(fromName) ?? null) : null;
  const resolvedTo = found.get(toName);
  if (resolvedTo === undefined) throw apiError('ACCOUNT_NOT_FOUND', `account ${toName} does not exist`);
  if (from !== null && from.accountName === resolvedTo.accountName) {
    throw apiError('BAD_REQUEST', 'source and destination accounts must be different');
  }
  if (from !== null && from.currency !== request.currency)
    throw apiError('BAD_REQUEST', `account ${from.accountName} is not in ${request.currency}`);
  if (resolvedTo.currency !== request.currency)
    throw apiError('BAD_REQUEST', `account ${resolvedTo.accountName} is not in ${request.currency}`);
  return { from, to: resolvedTo };
}
