import { createHash } from 'node:crypto';

/**
 * What leaves the database adapter when a statement fails: the SQLSTATE, a name for the statement
 * and the constraint it broke, nothing of the data. The drivers' own errors carry the SQL text,
 * every parameter (PGlite) and a `detail` that quotes row values ("Key (x)=(…) already exists"),
 * and any of them would reach a log line (docs/SECURITY.md §8).
 */
export class DatabaseError extends Error {
  override readonly name = 'DatabaseError';

  constructor(
    /** The SQLSTATE, e.g. 23505 for a unique violation. */
    readonly code: string,
    /** `VERB relation #hash`: enough to find the statement in the source, none of its values. */
    readonly statement: string,
    /** A schema name, never data. */
    readonly constraint: string | undefined,
  ) {
    super(`${statement} failed with SQLSTATE ${code}${constraint === undefined ? '' : ` (constraint ${constraint})`}`);
  }
}

const SQLSTATE = /^[0-9A-Z]{5}$/;
const RELATION = /\b(?:FROM|INTO|UPDATE|JOIN)\s+([a-z_][a-z0-9_.]*)|\b([a-z_][a-z0-9_]*)\s*\(/i;
const statementLabels = new Map<string, string>();
/** Texts are the process's own (a few hundred); past this, labels are computed again rather than kept. */
const LABELS_KEPT_MAX = 1_000;

/** A stable, value-free name for a statement text: its verb, the first relation or function, a short hash. */
export function statementLabel(text: string): string {
  const known = statementLabels.get(text);
  if (known !== undefined) return known;
  const body = text.trim();
  const verb = /^[A-Za-z]+/.exec(body)?.[0]?.toUpperCase() ?? 'SQL';
  const match = RELATION.exec(body);
  const target = match?.[1] ?? match?.[2];
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 8);
  const label = `${verb}${target === undefined ? '' : ` ${target}`} #${hash}`;
  if (statementLabels.size < LABELS_KEPT_MAX) statementLabels.set(text, label);
  return label;
}

/** A driver's error of a failed statement as a DatabaseError; anything else (a lost connection, our own errors) as it is. */
export function asDatabaseError(error: unknown, text: string): unknown {
  if (error instanceof DatabaseError || typeof error !== 'object' || error === null) return error;
  const { code, constraint } = error as { code?: unknown; constraint?: unknown };
  if (typeof code !== 'string' || !SQLSTATE.test(code)) return error;
  return new DatabaseError(code, statementLabel(text), typeof constraint === 'string' ? constraint : undefined);
}
