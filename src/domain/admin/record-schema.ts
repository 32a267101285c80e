import Type, { type TObject, type TOptional, type TProperties } from 'typebox';

/**
 * Pieces shared by the schemas of the admin-managed records. Each record (fee rule, route, limit
 * rule, auth policy, service key) has one set of writable fields; the create body, the PATCH body,
 * the CONFIG_FILE entry and the client's input type are all derived from it, so a bound set here
 * holds everywhere. Defaults are those of the table columns and are only described: a schema
 * default would also fill in absent fields of a PATCH.
 */

export const amountField = (description: string) => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });

/** Priorities order a handful of rules; the bound keeps them far inside the integer column. */
const PRIORITY_ABS_MAX = 1_000_000;
export const priorityField = (description: string) => Type.Integer({ minimum: -PRIORITY_ABS_MAX, maximum: PRIORITY_ABS_MAX, description });

export const ActiveField = Type.Boolean({ description: 'default true; inactive records are ignored' });
export { Timestamp } from '../wire-types.js';
export const RecordId = Type.Integer();
/**
 * The operation type of a stored record: new records name a known type, but the column has no
 * CHECK, so a row written before a type was retired still reads back.
 */
export const StoredOperationType = Type.String();
export const NameField = Type.String({ minLength: 1, maxLength: 100 });

type CreateProperties<F extends TProperties, R extends keyof F> = { [K in keyof F]: K extends R ? F[K] : TOptional<F[K]> };
type PatchProperties<F extends TProperties> = { [K in keyof F]: TOptional<F[K]> };

/**
 * The create body (the `required` fields, the rest optional; also a CONFIG_FILE entry) and the
 * PATCH body (any non-empty subset) of one record's writable fields.
 */
export function inputSchemas<F extends TProperties, R extends keyof F & string>(fields: F, required: readonly R[]) {
  const entries = Object.entries(fields);
  // Object.fromEntries cannot carry the mapped type; the two properties types above state it.
  const createProperties = Object.fromEntries(
    entries.map(([name, schema]) => [name, required.some((field) => field === name) ? schema : Type.Optional(schema)]),
  );
  const patchProperties = Object.fromEntries(entries.map(([name, schema]) => [name, Type.Optional(schema)]));
  return {
    create: Type.Object(createProperties as CreateProperties<F, R>, { additionalProperties: false }) as TObject<CreateProperties<F, R>>,
    patch: Type.Object(patchProperties as PatchProperties<F>, { additionalProperties: false, minProperties: 1 }) as TObject<
      PatchProperties<F>
    >,
  };
}
