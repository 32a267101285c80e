import { RE2JS } from 're2js';

/**
 * Account-name patterns of service keys (`fromAccountOverride.namePattern`, …) run on RE2's
 * automaton (re2js, a port of RE2 in JavaScript), whose matching time grows linearly with the name
 * whatever the pattern: an admin-written `(a+)+$` cannot hold the event loop (docs/rules.md R61).
 * RE2 has no backreferences or look-arounds; a pattern using them is refused when it is written.
 */
function compile(pattern: string): RE2JS | Error {
  try {
    return RE2JS.compile(pattern);
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

/** Why RE2 cannot take `pattern` (a backreference, a look-around, bad syntax); undefined when it can. */
export function namePatternProblem(pattern: string): string | undefined {
  const entry = compile(pattern);
  return entry instanceof Error ? `is not a regular expression RE2 accepts (${entry.message})` : undefined;
}

/** Only patterns of stored keys reach it, so the cache is as small as the key table. */
const compiled = new Map<string, RE2JS | Error>();

/** True when `pattern` matches the whole of `name`: 'user\.1\.THB' may not admit 'user.1.THB.evil'. A pattern RE2 refuses matches nothing. */
export function matchesWholeName(pattern: string, name: string): boolean {
  let entry = compiled.get(pattern);
  if (entry === undefined) {
    entry = compile(pattern);
    compiled.set(pattern, entry);
  }
  return !(entry instanceof Error) && entry.matches(name);
}
