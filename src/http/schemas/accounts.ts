import Type from 'typebox';
import { ENTITY_TYPES } from '../../domain/model.js';
import { Currency } from '../../domain/wire-types.js';
import { HistoryEntry, Money, Uuid } from './shared.js';

/** An account as the service names it: its name and its ledger id. */
export const Account = Type.Object({ accountName: Type.String(), ledgerAccountId: Uuid });
export const EntityAccount = Type.Object({ ...Account.properties, created: Type.Boolean() });
export const EntityAccounts = Type.Object({ primary: EntityAccount, settlement: EntityAccount });
export const AccountCreated = Type.Union([Account, EntityAccounts]);
export const Balance = Type.Object({
  accountName: Type.String(),
  balance: Money,
  currency: Currency,
  at: Type.Optional(Type.String({ description: 'the instant asked for, as given (balance at a time, docs/rules.md R58)' })),
});
export const Transactions = Type.Object({ transactions: Type.Array(HistoryEntry) });

export const CreateAccountBody = Type.Object(
  {
    userId: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    currency: Type.Literal('THB'),
    entityType: Type.Optional(Type.Enum(ENTITY_TYPES, { description: 'default user' })),
  },
  { additionalProperties: false },
);

/** A PSPX wallet registration: the provider's wallet id, and whether it was there before the call. */
export const Registration = Type.Object({ walletId: Type.String(), alreadyRegistered: Type.Boolean() });
