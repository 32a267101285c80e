import Type from 'typebox';
import { CHANNELS, INTENT_STATUSES, OPERATION_TYPES } from './model.js';

/**
 * Schemas of the values every record and request shares on the wire, each written once. The
 * domain owns them so that the records' schemas (domain/rules, domain/auth), the request schemas
 * (domain/intents/create, http/schemas) and CONFIG_FILE name the same thing with the same bounds.
 */

/** The currency of a request that names none; the only one the ledger holds today. */
export const DEFAULT_CURRENCY = 'THB';

const CURRENCY_BOUNDS = { minLength: 3, maxLength: 3, pattern: '^[A-Z]{3}$' } as const;
/** An ISO 4217 code: three upper-case letters. */
export const Currency = Type.String({ ...CURRENCY_BOUNDS, description: 'ISO 4217, three upper-case letters' });
/** The same field where a request may leave it out. */
export const CurrencyOrDefault = Type.String({
  ...CURRENCY_BOUNDS,
  description: `ISO 4217, three upper-case letters; default ${DEFAULT_CURRENCY}`,
});

/** An account's name (user.42.THB, merchant.7.settlement.THB, system.fee.THB, ...). */
export const AccountName = Type.String({ minLength: 1, maxLength: 100 });

/** A service key's id: the keyid of its signatures, and the owner of its intents. */
export const ServiceId = Type.String({ minLength: 1, maxLength: 50, pattern: '^[A-Za-z0-9._-]+$' });

/** Money leaves the service as a decimal string of satang. */
export const Money = Type.String({ pattern: '^-?[0-9]+$', description: 'amount in satang, as a decimal string' });

export const Uuid = Type.String({ format: 'uuid' });
export const UuidV4 = Type.String({
  pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$',
  description: 'UUID version 4',
});

/** Every instant leaves the service as an RFC 3339 UTC string. */
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC' });

export const IntentStatusSchema = Type.Enum(INTENT_STATUSES);
export const OperationTypeSchema = Type.Enum(OPERATION_TYPES);
export const ChannelSchema = Type.Enum(CHANNELS);
