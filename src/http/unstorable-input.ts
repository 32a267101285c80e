/**
 * Input that passes a JSON schema but that PostgreSQL or JSON.stringify cannot take
 * (docs/SECURITY.md §6). Checked once per request part, before its schema, for every route.
 */

/** Nesting below the request part itself (a field of the body is level 1): far beyond any real metadata or condition. */
export const JSON_DEPTH_MAX = 32;

/** In AJV's error shape, so that the one error handler answers it as any schema error. */
export interface InputIssue {
  instancePath: string;
  message: string;
}

/**
 * A lone UTF-16 surrogate (valid in a JSON escape, refused by jsonb and silently replaced in text
 * columns) or a NUL (refused by both text and jsonb).
 */
const isStorableText = (text: string) => text.isWellFormed() && !text.includes('\u0000');

/** The first thing in `value` the service refuses, or null. Object keys count as text too. */
export function unstorableInput(value: unknown): InputIssue | null {
  return visit(value, 0);
}

function visit(value: unknown, level: number): InputIssue | null {
  switch (typeof value) {
    case 'string':
      return isStorableText(value) ? null : { instancePath: '', message: 'must not contain a lone UTF-16 surrogate or a NUL character' };
    case 'number':
      // 1e400 parses to Infinity, which JSON.stringify would store as null.
      return Number.isFinite(value) ? null : { instancePath: '', message: 'must be a finite number' };
    case 'object':
      if (value === null) return null;
      if (level > JSON_DEPTH_MAX) return { instancePath: '', message: `must not nest deeper than ${JSON_DEPTH_MAX} levels` };
      return Array.isArray(value) ? visitItems(value, level) : visitFields(Object.entries(value), level);
    default:
      return null;
  }
}

function visitItems(items: readonly unknown[], level: number): InputIssue | null {
  for (let index = 0; index < items.length; index++) {
    const issue = visit(items[index], level + 1);
    if (issue !== null) return within(String(index), issue);
  }
  return null;
}

function visitFields(fields: ReadonlyArray<readonly [string, unknown]>, level: number): InputIssue | null {
  for (const [key, field] of fields) {
    // Reported at the object: the key itself is what cannot be printed or stored.
    if (!isStorableText(key))
      return { instancePath: '', message: 'must not have a property name with a lone UTF-16 surrogate or a NUL character' };
    const issue = visit(field, level + 1);
    if (issue !== null) return within(key, issue);
  }
  return null;
}

/** The path is built only for the one value refused, on the way out. */
function within(segment: string, issue: InputIssue): InputIssue {
  issue.instancePath = `/${segment.replaceAll('~', '~0').replaceAll('/', '~1')}${issue.instancePath}`;
  return issue;
}
