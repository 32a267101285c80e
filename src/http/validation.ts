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
  return ajv;
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const bodyAjv = makeAjv({ coerceTypes: false });
  const textAjv = makeAjv({ coerceTypes: true });
  return ({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object);
}
