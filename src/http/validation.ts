import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { unstorableInput } from './unstorable-input.js';

/** ajv-formats' own date-time check (calendar days, offsets), kept apart from the stricter one below. */
const isRfc3339DateTime = addFormats.default(new Ajv(), ['date-time']).compile({ type: 'string', format: 'date-time' });

/** Years 0001 to 9999: what both JavaScript and PostgreSQL read the same way from the text. */
const INSTANT_MS_MIN = Date.parse('0001-01-01T00:00:00Z');
const INSTANT_MS_MAX = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * RFC 3339 allows a leap second (23:59:60), which Date cannot hold, and year 0000, which
 * PostgreSQL cannot: both reached SQL as a 500. A date-time here is one both can read.
 */
function isStorableInstant(text: string): boolean {
  if (!isRfc3339DateTime(text) || text.startsWith('0000')) return false;
  const ms = Date.parse(text);
  return ms >= INSTANT_MS_MIN && ms <= INSTANT_MS_MAX;
}

/**
 * Bodies are validated strictly (a JSON string is never taken for a number, unknown fields are
 * refused); query strings and headers are text on the wire, so there types are coerced.
 */
function makeAjv(options: Options): Ajv {
  const ajv = new Ajv({ allErrors: false, useDefaults: true, removeAdditional: false, strict: false, ...options });
  addFormats.default(ajv);
  ajv.addFormat('date-time', { type: 'string', validate: isStorableInstant });
  // ajv-formats also takes `urn:uuid:…`, which PostgreSQL's uuid refuses (a 500 on every intent id).
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  return ajv;
}

/**
 * Every request part with a schema is first searched for what no schema expresses: text the
 * database cannot store, non-finite numbers and deep nesting (unstorable-input.ts). Its refusal
 * is a schema error like any other, so the route's validation status applies.
 */
export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const bodyAjv = makeAjv({ coerceTypes: false });
  const textAjv = makeAjv({ coerceTypes: true });
  return ({ schema, httpPart }) => {
    const validate = (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object);
    const checked: ReturnType<FastifySchemaCompiler<unknown>> = (data: unknown) => {
      const issue = unstorableInput(data);
      if (issue !== null) {
        checked.errors = [{ keyword: 'storable', schemaPath: '#', params: {}, ...issue }];
        return false;
      }
      const valid = validate(data);
      checked.errors = validate.errors ?? null;
      return valid;
    };
    return checked;
  };
}
