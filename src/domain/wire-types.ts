import Type from 'typebox';
import { CHANNELS, INTENT_STATUSES, OPERATION_TYPES } from './model.js';

/**
 * Schemas of the values every record and request shares on the wire. The domain owns them so
 * that the records' schemas (domain/admin) and the request schemas (http) name the same thing.
 */

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
