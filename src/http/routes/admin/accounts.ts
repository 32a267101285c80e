import type { App } from '../../typed-app.js';
import Type from 'typebox';
import type { Database } from '../../../adapters/database.js';
import { balanceOf, findAccount } from '../../../domain/accounts/accounts.js';
import { apiError } from '../../../domain/errors.js';
import { listTransactions } from '../../../domain/accounts/history.js';
import type { Ledger } from '../../../ledger/ledger.js';
import { responses } from '../../schemas/shared.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import { AdminAccount } from '../../schemas/admin.js';

/** The history a look-up shows at once; older rows are paged with offset. */
const HISTORY_LIMIT_DEFAULT = 20;
const HISTORY_LIMIT_MAX = 100;

const AccountQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: HISTORY_LIMIT_MAX, default: HISTORY_LIMIT_DEFAULT }),
    offset: Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 0 }),
  },
  { additionalProperties: false },
);

/**
 * GET /admin/accounts/{name}: balance and recent history of any account in one read, for the
 * console (the admin token, docs/rules.md R37). The signed /accounts/{name}/balance and /transactions stay the
 * services' interface.
 */
export function adminAccountRoutes(app: App, deps: { readonly db: Database; readonly ledger: Ledger }): void {
  app.get(
    '/admin/accounts/:name',
    {
      config: { auth: 'admin' },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        operationId: 'getAdminAccount',
        summary: 'Read any account: balance (credits posted minus debits posted) and history, newest first',
        params: Type.Object({ name: Type.String({ minLength: 1, maxLength: 100, description: 'account name or ledger account id' }) }),
        querystring: AccountQuery,
        response: responses({ 200: AdminAccount }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const { name } = request.params;
      const { limit, offset } = request.query;
      const account = await findAccount(deps.db, name);
      if (account === null) throw apiError('NOT_FOUND', 'account not found');
      const balance = await balanceOf(deps.db, deps.ledger, account);
      const transactions = await listTransactions(deps.db, account.accountName, limit, offset);
      return {
        accountName: account.accountName,
        ledgerAccountId: account.ledgerAccountId,
        accountType: account.accountType,
        userId: account.userId,
        currency: account.currency,
        balance: balance.toString(),
        transactions,
      };
    },
  );
}
