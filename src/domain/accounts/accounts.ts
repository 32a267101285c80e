import { CoalescedReads, departureFor } from '../../adapters/coalesced-reads.js';
import type { Database, Sql } from '../../adapters/database.js';
import { ledgerAccountId } from '../../ledger/account-id.js';
import { AccountFlags, type Ledger, LEDGER_THB } from '../../ledger/ledger.js';
import { entityAccountNames, parseAccountName } from './account-names.js';
import { apiError } from '../errors.js';
import { type AccountType, type EntityType, LEDGER_CODE_BY_ACCOUNT_TYPE, UNOWNED_ACCOUNT_TYPES } from '../model.js';

export interface AccountRecord {
  readonly id: bigint;
  readonly accountName: string;
  readonly ledgerAccountId: string;
  readonly ledgerNumber: number;
  readonly accountType: AccountType;
  readonly userId: number | null;
  readonly currency: string;
  readonly pspxWalletId: string | null;
  readonly createdAt: Date;
}

interface AccountRow {
  id: bigint;
  account_name: string;
  ledger_account_id: string;
  ledger_number: number;
  account_type: AccountType;
  user_id: bigint | null;
  currency: string;
  pspx_wallet_id: string | null;
  created_at: Date;
}

export const ACCOUNT_COLUMNS =
  'id, account_name, ledger_account_id, ledger_number, account_type, user_id, currency, pspx_wallet_id, created_at';

export function toAccountRecord(row: AccountRow): AccountRecord {
  return {
    id: row.id,
    accountName: row.account_name,
    ledgerAccountId: row.ledger_account_id,
    ledgerNumber: row.ledger_number,
    accountType: row.account_type,
    userId: row.user_id === null ? null : Number(row.user_id),
    currency: row.currency,
    pspxWalletId: row.pspx_wallet_id,
    createdAt: row.created_at,
  };
}

export const isGuarded = (type: AccountType) => !UNOWNED_ACCOUNT_TYPES.includes(type);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string) => UUID.test(value);

export interface NewAccount {
  readonly name: string;
  readonly type: AccountType;
  readonly userId: number | null;
}

/**
 * Creates the account map row and its ledger account in the caller's transaction; true when it
 * did not exist. The name must follow its type's pattern, so that owner and currency are derivable.
 */
export async function createAccount(sql: Sql, ledger: Ledger, account: NewAccount): Promise<boolean> {
  const parsed = parseAccountName(account.name);
  if (parsed === null || parsed.accountType !== account.type || parsed.userId !== account.userId) {
    throw apiError('VALIDATION_ERROR', `account name ${account.name} does not follow the pattern of ${account.type}`);
  }
  const id = ledgerAccountId(account.name);
  const inserted = await sql.query(
    `INSERT INTO accounts (account_name, ledger_account_id, ledger_number, account_type, user_id, currency)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (account_name) DO NOTHING`,
    [account.name, id, LEDGER_THB, account.type, account.userId, parsed.currency],
  );
  const failures = await ledger.createAccounts(sql, [
    {
      id,
      ledger: LEDGER_THB,
      code: LEDGER_CODE_BY_ACCOUNT_TYPE[account.type],
      flags: accountFlags(account),
    },
  ]);
  const failure = failures.find((f) => f.result !== 'exists');
  if (failure !== undefined) throw new Error(`ledger refused account ${account.name}: ${failure.result}`);
  return inserted.rowCount === 1;
}

/** Every account a user owns keeps its balance history (docs/rules.md R58); owned accounts are guarded. */
function accountFlags(account: NewAccount): number {
  if (!isGuarded(account.type)) return AccountFlags.none;
  return AccountFlags.debitsMustNotExceedCredits | (account.userId === null ? 0 : AccountFlags.history);
}

/** Looks an account up by its name or by its ledger UUID. */
export async function findAccount(sql: Sql, nameOrLedgerId: string): Promise<AccountRecord | null> {
  const column = isUuid(nameOrLedgerId) ? 'ledger_account_id' : 'account_name';
  const { rows } = await sql.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE ${column} = $1`, [lookupKey(nameOrLedgerId)]);
  return rows[0] === undefined ? null : toAccountRecord(rows[0]);
}

/**
 * Accounts by name or by ledger UUID (lower case, see `lookupKey`), each under the key it was
 * asked by; absent keys are missing from the map.
 */
export type AccountLookup = (keys: readonly string[]) => Promise<ReadonlyMap<string, AccountRecord>>;

/** The key an account lookup answers under: a ledger UUID in lower case (the database's form), a name as it is. */
export const lookupKey = (nameOrLedgerId: string) => (isUuid(nameOrLedgerId) ? nameOrLedgerId.toLowerCase() : nameOrLedgerId);

/** One account by its name or its ledger UUID, through the shared lookup. */
export async function lookupAccount(lookup: AccountLookup, nameOrLedgerId: string): Promise<AccountRecord | null> {
  const key = lookupKey(nameOrLedgerId);
  return (await lookup([key])).get(key) ?? null;
}

/**
 * A lookup whose reads are shared by the requests that arrive together (the hot path of POST
 * /intents and of an invoice's issue and confirm): one read of the names and one of the ledger
 * ids per round, whatever the number of requests.
 */
export function sharedAccountLookup(db: Database): AccountLookup {
  const byName = new CoalescedReads((names: readonly string[]) => findAccountsByName(db, names), departureFor(db));
  const byLedgerId = new CoalescedReads((ids: readonly string[]) => findAccountsByLedgerId(db, ids), departureFor(db));
  return async (keys) => {
    const ids = keys.filter(isUuid).map((id) => id.toLowerCase());
    if (ids.length === 0) return byName.load(keys);
    const names = keys.filter((key) => !isUuid(key));
    const [named, identified] = await Promise.all([names.length === 0 ? new Map() : byName.load(names), byLedgerId.load(ids)]);
    return new Map([...named, ...identified]);
  };
}

export async function findAccountsByName(sql: Sql, names: readonly string[]): Promise<Map<string, AccountRecord>> {
  const { rows } = await sql.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE account_name = ANY($1)`, [names]);
  return new Map(rows.map((row) => [row.account_name, toAccountRecord(row)]));
}

async function findAccountsByLedgerId(sql: Sql, ids: readonly string[]): Promise<Map<string, AccountRecord>> {
  const { rows } = await sql.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE ledger_account_id = ANY($1::uuid[])`, [ids]);
  return new Map(rows.map((row) => [row.ledger_account_id, toAccountRecord(row)]));
}

/** Balance = credits posted − debits posted, read live from the ledger. */
export async function balanceOf(sql: Sql, ledger: Ledger, account: AccountRecord): Promise<bigint> {
  const [ledgerAccount] = await ledger.lookupAccounts(sql, [account.ledgerAccountId]);
  if (ledgerAccount === undefined) throw new Error(`account ${account.accountName} is mapped but missing from the ledger`);
  return ledgerAccount.creditsPosted - ledgerAccount.debitsPosted;
}

export interface AccountOpening {
  /** X-User-Id: 0 is the platform's admin bypass; anyone else may only open their own accounts. */
  readonly actor: number;
  readonly serviceId: string;
  /** The entity types the calling service key may open (permissions.accountEntityTypes). */
  readonly entityTypesAllowed: readonly EntityType[];
  readonly userId: number;
  readonly entityType: EntityType;
  readonly currency: string;
}

export interface OpenedAccount {
  readonly accountName: string;
  readonly ledgerAccountId: string;
  readonly created: boolean;
}

/**
 * POST /accounts: the accounts of a user (a wallet), or of a merchant or agent (a wallet and a
 * settlement account), opened together and idempotently; `settlement` is null for a user.
 */
export async function openAccounts(
  db: Database,
  ledger: Ledger,
  opening: AccountOpening,
): Promise<{ primary: OpenedAccount; settlement: OpenedAccount | null }> {
  if (opening.actor !== 0 && opening.actor !== opening.userId) throw apiError('VALIDATION_ERROR', 'X-User-Id must equal body.userId');
  if (!opening.entityTypesAllowed.includes(opening.entityType)) {
    throw apiError('FORBIDDEN', `service ${opening.serviceId} may not create ${opening.entityType} accounts`);
  }
  const names = entityAccountNames(opening.entityType, opening.userId, opening.currency);
  return db.transaction(async (tx) => {
    const open = async (account: { name: string; type: AccountType }): Promise<OpenedAccount> => ({
      accountName: account.name,
      ledgerAccountId: ledgerAccountId(account.name),
      created: await createAccount(tx, ledger, { name: account.name, type: account.type, userId: opening.userId }),
    });
    const primary = await open(names.primary);
    const settlement = names.settlement === null ? null : await open(names.settlement);
    return { primary, settlement };
  });
}
