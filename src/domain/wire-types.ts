import Type from 'typebox';

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
