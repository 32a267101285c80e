import type { FastifyInstance } from 'fastify';

/**
 * Levels of nesting any field of a body may have (metadata, a policy's condition): deeper JSON is
 * refused before it reaches the fee sandbox, the policy engine or PostgreSQL's jsonb.
 */
export const FIELD_DEPTH_MAX = 32;

interface Issue {
  readonly instancePath: string;
  readonly message: string;
}

/**
 * The first value PostgreSQL cannot store faithfully: a lone UTF-16 surrogate (jsonb refuses it,
 * text columns silently store U+FFFD instead), a NUL character (both refuse it), or nesting past
 * the limit. Keys are checked too; a bad key is reported at its parent's path, never echoed.
 */
function firstUnstorable(value: unknown, path: string, levelsLeft: number): Issue | null {
  if (typeof value === 'string') {
    if (!value.isWellFormed()) return { instancePath: path, message: 'must not contain lone UTF-16 surrogates' };
    if (value.includes('\u0000')) return { instancePath: path, message: 'must not contain NUL characters' };
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  if (levelsLeft === 0) return { instancePath: path, message: `must not nest deeper than ${FIELD_DEPTH_MAX} levels` };
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const issue = firstUnstorable(value[index], `${path}/${index}`, levelsLeft - 1);
      if (issue !== null) return issue;
    }
    return null;
  }
  for (const [key, child] of Object.entries(value)) {
    if (!key.isWellFormed() || key.includes('\u0000')) return { instancePath: path, message: 'must not have a key with lone UTF-16 surrogates or NUL characters' };
    const issue = firstUnstorable(child, `${path}/${key}`, levelsLeft - 1);
    if (issue !== null) return issue;
  }
  return null;
}

/** Shaped as a schema error, so each route answers it as it answers its own (422, or 400 where the spec says so). */
function validationError(issue: Issue, context: 'body' | 'querystring' | 'params'): Error {
  return Object.assign(new Error(issue.message), { validation: [issue], validationContext: context, statusCode: 422 });
}

/**
 * Every body, query string and path parameter is checked once, before its route's schema
 * (docs/SECURITY.md §6). Registered after authentication: an unsigned caller learns nothing.
 */
export function registerInputGuard(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    // The body object itself is one level; each of its fields may nest FIELD_DEPTH_MAX more.
    const body = firstUnstorable(request.body, '', FIELD_DEPTH_MAX + 1);
    if (body !== null) throw validationError(body, 'body');
    const query = firstUnstorable(request.query, '', 2);
    if (query !== null) throw validationError(query, 'querystring');
    const params = firstUnstorable(request.params, '', 2);
    if (params !== null) throw validationError(params, 'params');
  });
}
