import type { App } from '../typed-app.js';
import type { Database } from '../../adapters/database.js';
import { type PspxClient, WalletCustomer } from '../../adapters/pspx/pspx-client.js';
import { apiError } from '../../domain/errors.js';
import { isPspxOperationType } from '../../domain/model.js';
import { registerPspxWallet } from '../../domain/accounts/pspx-wallets.js';
import { callerKey, requireUserId } from '../plugins/auth.js';
import { responses } from '../schemas/shared.js';
import { Registration } from '../schemas/accounts.js';

export function pspxWalletRoutes(app: App, deps: { db: Database; pspx: PspxClient }) {
  app.post(
    '/accounts/register-ipps',
    {
      config: { userIdHeader: 'required' },
      schema: {
        tags: ['accounts'],
        operationId: 'registerIppsWallet',
        summary: 'Register the user wallet with PSPX (idempotent: 201 first, then 200 without a provider call)',
        body: WalletCustomer,
        response: responses({ 200: Registration, 201: Registration }, [
          'BAD_REQUEST',
          'FORBIDDEN',
          'NOT_FOUND',
          'VALIDATION_ERROR',
          'PSPX_UNAVAILABLE',
        ]),
      },
    },
    async (request, reply) => {
      const key = callerKey(request);
      if (!key.permissions.allowedOperationTypes.some(isPspxOperationType)) {
        throw apiError('FORBIDDEN', `service ${key.serviceId} may not register PSPX wallets`);
      }
      const userId = requireUserId(request, 'BAD_REQUEST');
      // 0 is the admin bypass elsewhere; here it would name no wallet, so it is refused as malformed.
      if (userId === 0) throw apiError('BAD_REQUEST', 'X-User-Id must be a positive integer');
      const registration = await registerPspxWallet({ sql: deps.db, pspx: deps.pspx }, userId, request.body);
      reply.status(registration.alreadyRegistered ? 200 : 201);
      return registration;
    },
  );
}
