import assert from 'node:assert/strict';
import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

/**
 * Bodies are validated strictly (a JSON string is never taken for a number, unknown fields are
 * refused); query strings and headers are text on the wire, so there types are coerced.
 */
function makeAjv(options: Options): Ajv {
  const ajv = new Ajv({ allErrors: false, useDefaults: true, removeAdditional: false, strict: false, ...options });
  addFormats.default(ajv);
  narrowDateTime(ajv);
  return ajv;
}

/** UTC offsets on Earth run from -12:00 to +14:00; PostgreSQL refuses offsets past ±15:59. */
const OFFSET_HOURS_MAX = 14;
const DATE_TIME_PARTS = /^(\d{4})-.*(?:[Zz]|[+-](\d{2}):\d{2})$/;

/**
 * RFC 3339 allows year 0000 and offsets up to ±23:59, which PostgreSQL's timestamptz refuses
 * (there is no year 0): such a value is the client's error, refused here rather than by the
 * database with a 500 (docs/SECURITY.md §6).
 */
function narrowDateTime(ajv: Ajv): void {
  const rfc3339 = ajv.formats['date-time'];
  assert.ok(typeof rfc3339 === 'object' && 'validate' in rfc3339 && typeof rfc3339.validate === 'function', 'ajv-formats defines date-time');
  const validRfc3339 = rfc3339.validate as (text: string) => boolean;
  ajv.addFormat('date-time', {
    type: 'string',
    validate: (text: string) => {
      const parts = DATE_TIME_PARTS.exec(text);
      return validRfc3339(text) && parts !== null && Number(parts[1]) >= 1 && Number(parts[2] ?? 0) <= OFFSET_HOURS_MAX;
    },
  });
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const bodyAjv = makeAjv({ coerceTypes: false });
  const textAjv = makeAjv({ coerceTypes: true });
  return ({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object);
}
