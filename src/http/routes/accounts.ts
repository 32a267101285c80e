import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import type { Database } from '../../adapters/database.js';
import { entityAccountNames } from '../../domain/account-names.js';
import { balanceOf, createAccount, findAccount, isUuid } from '../../domain/accounts.js';
import { apiError } from '../../domain/errors.js';
import { listTransactions } from '../../domain/history.js';
import type { Ledger } from '../../ledger/ledger.js';
import { ledgerAccountId } from '../../ledger/account-id.js';
import { callerKey, requireUserId } from '../plugins/auth.js';
import { HistoryEntry, Money, responses, Uuid } from '../schemas.js';

const CreatedAccount = Type.Object({ accountName: Type.String(), ledgerAccountId: Uuid, created: Type.Boolean() });

const CreateAccountBody = Type.Object(
  {
    userId: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    currency: Type.Literal('THB'),
    entityType: Type.Optional(Type.Union([Type.Literal('user'), Type.Literal('merchant'), Type.Literal('agent')], { default: 'user' })),
  },
  { additionalProperties: false },
);

const AccountName = Type.Object({ name: Type.String({ minLength: 1, maxLength: 100 }) });

export function accountRoutes(app: FastifyInstance, deps: { db: Database; ledger: Ledger }) {
  const { db, ledger } = deps;

  app.post(
    '/accounts',
    {
      schema: {
        tags: ['accounts'],
        summary: 'Create the ledger accounts of a user, merchant or agent (idempotent)',
        body: CreateAccountBody,
        response: responses(
          {
            200: Type.Union([Type.Object({ accountName: Type.String(), ledgerAccountId: Uuid }), Type.Object({ primary: CreatedAccount, settlement: CreatedAccount })]),
            201: Type.Union([Type.Object({ accountName: Type.String(), ledgerAccountId: Uuid }), Type.Object({ primary: CreatedAccount, settlement: CreatedAccount })]),
          },
          [401, 403, 422],
        ),
      },
    },
    async (request, reply) => {
      const body = request.body as { userId: number; currency: 'THB'; entityType: 'user' | 'merchant' | 'agent' };
      const actor = requireUserId(request, 'VALIDATION_ERROR');
      // 0 is the platform's admin bypass; anyone else may only open their own accounts.
      if (actor !== 0 && actor !== body.userId) throw apiError('VALIDATION_ERROR', 'X-User-Id must equal body.userId');
      const key = callerKey(request);
      const entityTypes: readonly string[] = key.permissions.accountEntityTypes ?? [];
      if (!entityTypes.includes(body.entityType)) {
        throw apiError('FORBIDDEN', `service ${key.serviceId} may not create ${body.entityType} accounts`);
      }
      const names = entityAccountNames(body.entityType, body.userId, body.currency);
      const created = await db.transaction(async (tx) => {
        const primary = await createAccount(tx, ledger, { name: names.primary.name, type: names.primary.type, userId: body.userId });
        const settlement =
          names.settlement === null
            ? null
            : await createAccount(tx, ledger, { name: names.settlement.name, type: names.settlement.type, userId: body.userId });
        return { primary, settlement };
      });
      const anyCreated = created.primary || created.settlement === true;
      reply.status(anyCreated ? 201 : 200);
      if (names.settlement === null) {
        return { accountName: names.primary.name, ledgerAccountId: ledgerAccountId(names.primary.name) };
      }
      return {
        primary: { accountName: names.primary.name, ledgerAccountId: ledgerAccountId(names.primary.name), created: created.primary },
        settlement: {
          accountName: names.settlement.name,
          ledgerAccountId: ledgerAccountId(names.settlement.name),
          created: created.settlement === true,
        },
      };
    },
  );

  app.get(
    '/accounts/:name/balance',
    {
      schema: {
        tags: ['accounts'],
        summary: 'Live balance: credits posted minus debits posted',
        params: AccountName,
        response: responses({ 200: Type.Object({ accountName: Type.String(), balance: Money, currency: Type.String() }) }, [401, 404]),
      },
    },
    async (request) => {
      const { name } = request.params as { name: string };
      const account = await findAccount(db, name);
      if (account === null) throw apiError('NOT_FOUND', 'account not found');
      const balance = await balanceOf(db, ledger, account);
      return { accountName: name, balance: balance.toString(), currency: isUuid(name) ? 'THB' : (name.split('.').at(-1) ?? 'THB') };
    },
  );

  app.get(
    '/accounts/:name/transactions',
    {
      schema: {
        tags: ['accounts'],
        summary: 'Transaction history of an account, newest first',
        params: AccountName,
        querystring: Type.Object(
          {
            limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
            offset: Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 0 }),
          },
          { additionalProperties: false },
        ),
        response: responses(
          {
            200: Type.Object({
              transactions: Type.Array(HistoryEntry),
            }),
          },
          [401, 422],
        ),
      },
    },
    async (request) => {
      const { name } = request.params as { name: string };
      const { limit, offset } = request.query as { limit: number; offset: number };
      const accountName = isUuid(name) ? ((await findAccount(db, name))?.accountName ?? null) : name;
      if (accountName === null) return { transactions: [] };
      return { transactions: await listTransactions(db, accountName, limit, offset) };
    },
  );
}
