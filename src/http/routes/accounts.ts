import type { App } from '../typed-app.js';
import Type from 'typebox';
import type { Database } from '../../adapters/database.js';
import { balanceOf, findAccount, isUuid, openAccounts } from '../../domain/accounts/accounts.js';
import { apiError } from '../../domain/errors.js';
import { listTransactions } from '../../domain/accounts/history.js';
import { balanceAt } from '../../domain/statements/statements.js';
import type { Ledger } from '../../ledger/ledger.js';
import { callerKey, requireUserId } from '../plugins/auth.js';
import { responses } from '../schemas/shared.js';
import { AccountCreated, Balance, CreateAccountBody, Transactions } from '../schemas/accounts.js';
import { InstantText } from '../schemas/statements.js';
import { AccountName } from '../../domain/wire-types.js';

const AccountNameParams = Type.Object({ name: AccountName });

export function accountRoutes(app: App, deps: { db: Database; ledger: Ledger }) {
  const { db, ledger } = deps;

  app.post(
    '/accounts',
    {
      config: { userIdHeader: 'required' },
      schema: {
        tags: ['accounts'],
        operationId: 'createAccount',
        summary: 'Create the ledger accounts of a user, merchant or agent (idempotent)',
        body: CreateAccountBody,
        response: responses({ 200: AccountCreated, 201: AccountCreated }, ['FORBIDDEN', 'VALIDATION_ERROR']),
      },
    },
    async (request, reply) => {
      const { body } = request;
      const key = callerKey(request);
      const { primary, settlement } = await openAccounts(db, ledger, {
        actor: requireUserId(request, 'VALIDATION_ERROR'),
        serviceId: key.serviceId,
        entityTypesAllowed: key.permissions.accountEntityTypes ?? [],
        userId: body.userId,
        entityType: body.entityType ?? 'user',
        currency: body.currency,
      });
      reply.status(primary.created || settlement?.created === true ? 201 : 200);
      if (settlement === null) return { accountName: primary.accountName, ledgerAccountId: primary.ledgerAccountId };
      return { primary, settlement };
    },
  );

  app.get(
    '/accounts/:name/balance',
    {
      schema: {
        tags: ['accounts'],
        operationId: 'getAccountBalance',
        summary: 'Live balance, or with at the balance at that instant: credits posted minus debits posted',
        description:
          'With at (ISO 8601 with an offset, not in the future, on an account a user owns) the balance of the postings ' +
          'stamped at or before it; once at is more than 5 s in the past the answer never changes (docs/rules.md R58).',
        params: AccountNameParams,
        querystring: Type.Object({ at: Type.Optional(InstantText) }, { additionalProperties: false }),
        response: responses({ 200: Balance }, ['NOT_FOUND', 'VALIDATION_ERROR']),
      },
    },
    async (request) => {
      const { name } = request.params;
      if (request.query.at !== undefined) return balanceAt(db, name, request.query.at);
      const account = await findAccount(db, name);
      if (account === null) throw apiError('NOT_FOUND', 'account not found');
      const balance = await balanceOf(db, ledger, account);
      return { accountName: name, balance: balance.toString(), currency: account.currency };
    },
  );

  app.get(
    '/accounts/:name/transactions',
    {
      schema: {
        tags: ['accounts'],
        operationId: 'listAccountTransactions',
        summary: 'Transaction history of an account, newest first',
        params: AccountNameParams,
        querystring: Type.Object(
          {
            limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
            offset: Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 0 }),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: Transactions }, []),
      },
    },
    async (request) => {
      const { name } = request.params;
      const { limit, offset } = request.query;
      const accountName = isUuid(name) ? ((await findAccount(db, name))?.accountName ?? null) : name;
      if (accountName === null) return { transactions: [] };
      return { transactions: await listTransactions(db, accountName, limit, offset) };
    },
  );
}
