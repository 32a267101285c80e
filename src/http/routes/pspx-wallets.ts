import type { FastifyInstance } from 'fastify';
import Type, { type Static } from 'typebox';
import type { Database } from '../../adapters/database.js';
import type { PspxClient } from '../../adapters/pspx/pspx-client.js';
import { apiError } from '../../domain/errors.js';
import { registerPspxWallet } from '../../domain/pspx-wallets.js';
import { callerKey, requireUserId } from '../plugins/auth.js';
import { responses } from '../schemas.js';

const TEXT_LENGTH_MAX = 200;
const ADDRESS_LENGTH_MAX = 500;
const PSPX_OPERATION_TYPES: readonly string[] = ['PSPX_WITHDRAWAL', 'THAI_QR_PAY'];

const Text = (maxLength = TEXT_LENGTH_MAX) => Type.String({ minLength: 1, maxLength, pattern: '\\S' });
/** ajv-formats `date` is RFC 3339 full-date: 2023-02-29 and 2024-13-01 fail, 2024-02-29 passes. */
const CalendarDate = Type.String({ format: 'date', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$', description: 'YYYY-MM-DD' });
const Phone = Type.String({ pattern: '^\\+?[0-9][0-9 -]{5,18}[0-9]$', description: 'digits, optional leading +, spaces or dashes' });

const RegisterIppsBody = Type.Object(
  {
    externalUserId: Text(),
    customerEnglishName: Text(),
    senderTaxId: Type.String({ pattern: '^[0-9]{13}$', description: '13 digits' }),
    senderAccountName: Text(),
    senderMobileNumber: Type.Optional(Phone),
    documentExpiry: CalendarDate,
    dateOfBirth: CalendarDate,
    phoneNumber: Phone,
    nationality: Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2' }),
    address: Text(ADDRESS_LENGTH_MAX),
  },
  { additionalProperties: false },
);

const Registration = Type.Object({ walletId: Type.String(), alreadyRegistered: Type.Boolean() });

export function pspxWalletRoutes(app: FastifyInstance, deps: { db: Database; pspx: PspxClient }) {
  app.post(
    '/accounts/register-ipps',
    {
      schema: {
        tags: ['accounts'],
        summary: 'Register the user wallet with PSPX (idempotent: 201 first, then 200 without a provider call)',
        body: RegisterIppsBody,
        response: responses({ 200: Registration, 201: Registration }, [400, 401, 403, 404, 422, 503]),
      },
    },
    async (request, reply) => {
      const key = callerKey(request);
      if (!key.permissions.allowedOperationTypes.some((type) => PSPX_OPERATION_TYPES.includes(type))) {
        throw apiError('FORBIDDEN', `service ${key.serviceId} may not register PSPX wallets`);
      }
      const userId = requireUserId(request, 'BAD_REQUEST');
      // 0 is the admin bypass elsewhere; here it would name no wallet, so it is refused as malformed.
      if (userId === 0) throw apiError('BAD_REQUEST', 'X-User-Id must be a positive integer');
      const registration = await registerPspxWallet({ sql: deps.db, pspx: deps.pspx }, userId, request.body as Static<typeof RegisterIppsBody>);
      reply.status(registration.alreadyRegistered ? 200 : 201);
      return registration;
    },
  );
}
