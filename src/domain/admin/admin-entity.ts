import assert from 'node:assert/strict';
import type { Database, Sql } from '../../adapters/database.js';
import { apiError } from '../errors.js';
import { recordChange } from './change-log.js';

/**
 * The SQL shared by the admin-managed tables (fee rules, routes, limit rules, auth policies,
 * service keys). Each table is described once; table and column names come only from these
 * descriptors, never from a request, so building the statements from them is safe.
 */

export type Row = Readonly<Record<string, unknown>>;

export interface ColumnSpec {
  readonly column: string;
  /** Cast applied to the parameter, e.g. '::jsonb'. */
  readonly cast?: string;
  /** From the API value to the parameter (JSON text for jsonb, a decimal string for bigint). */
  readonly encode?: (value: unknown) => unknown;
}

export interface AdminEntity<Rec> {
  /** The `entity` of admin_changes rows, e.g. 'fee-rule'. */
  readonly entity: string;
  readonly table: string;
  readonly keyColumn: string;
  /** API field name → column, for the fields an admin may set. */
  readonly columns: Readonly<Record<string, ColumnSpec>>;
  readonly hasUpdatedAt: boolean;
  readonly orderBy: string;
  /** Row → API form: JSON-safe (money as decimal strings), so it is also the audit snapshot. */
  readonly fromRow: (row: Row) => Rec;
  readonly keyOf: (record: Rec) => string;
  /**
   * A PATCH body as the fields to write, given the stored record: absent, each named field replaces
   * the stored one; a record with nested objects merges them (RFC 7396, docs/rules.md R62).
   */
  readonly mergePatch?: (before: Rec, patch: Readonly<Record<string, unknown>>) => Readonly<Record<string, unknown>>;
}

export interface WriteOptions<Rec> {
  readonly actor: string;
  /** Runs on the written record before commit; throwing rolls the change back. */
  readonly check?: (record: Rec) => void | Promise<void>;
}

export interface ListOptions {
  readonly active: boolean | undefined;
  readonly limit: number;
  readonly offset: number;
}

export async function listRecords<Rec>(sql: Sql, entity: AdminEntity<Rec>, options: ListOptions): Promise<Rec[]> {
  const { rows } = await sql.query<Row>(
    `SELECT * FROM ${entity.table} WHERE ($1::boolean IS NULL OR active = $1::boolean)
      ORDER BY ${entity.orderBy} LIMIT $2 OFFSET $3`,
    [options.active ?? null, options.limit, options.offset],
  );
  return rows.map(entity.fromRow);
}

export async function getRecord<Rec>(sql: Sql, entity: AdminEntity<Rec>, key: string): Promise<Rec | null> {
  const { rows } = await sql.query<Row>(`SELECT * FROM ${entity.table} WHERE ${entity.keyColumn} = $1`, [key]);
  const row = rows[0];
  return row === undefined ? null : entity.fromRow(row);
}

/** Inserts the given fields (absent ones take the column default) and records the creation. */
export async function createRecord<Rec>(
  db: Database,
  entity: AdminEntity<Rec>,
  input: Readonly<Record<string, unknown>>,
  options: WriteOptions<Rec>,
): Promise<Rec> {
  const { columns, placeholders, params } = assignments(entity, input, 0);
  return withConstraintErrors(() =>
    db.transaction(async (tx) => {
      const { rows, rowCount } = await tx.query<Row>(
        `INSERT INTO ${entity.table} (${columns.join(', ')}) VALUES (${placeholders.join(', ')}) RETURNING *`,
        params,
      );
      assert.equal(rowCount, 1, `insert into ${entity.table} must write one row`);
      const created = entity.fromRow(rows[0] as Row);
      await options.check?.(created);
      await recordChange(tx, {
        actor: options.actor,
        entity: entity.entity,
        entityId: entity.keyOf(created),
        action: 'create',
        before: null,
        after: created,
      });
      return created;
    }),
  );
}

/** Changes the given fields; null when the record does not exist. */
export async function updateRecord<Rec>(
  db: Database,
  entity: AdminEntity<Rec>,
  key: string,
  patch: Readonly<Record<string, unknown>>,
  options: WriteOptions<Rec>,
): Promise<Rec | null> {
  return withConstraintErrors(() =>
    db.transaction(async (tx) => {
      const before = await lockRecord(tx, entity, key);
      if (before === null) return null;
      const fields = entity.mergePatch?.(before, patch) ?? patch;
      const { columns, placeholders, params } = assignments(entity, fields, 1);
      assert.ok(columns.length > 0, 'an update needs at least one field (the schema asks for one)');
      const sets = columns.map((column, index) => `${column} = ${placeholders[index]}`);
      if (entity.hasUpdatedAt) sets.push('updated_at = now()');
      const { rows, rowCount } = await tx.query<Row>(
        `UPDATE ${entity.table} SET ${sets.join(', ')} WHERE ${entity.keyColumn} = $1 RETURNING *`,
        [key, ...params],
      );
      assert.equal(rowCount, 1, `update of a locked ${entity.entity} must change one row`);
      const after = entity.fromRow(rows[0] as Row);
      await options.check?.(after);
      await recordChange(tx, { actor: options.actor, entity: entity.entity, entityId: key, action: 'update', before, after });
      return after;
    }),
  );
}

/**
 * Sets active = false. Deactivating an inactive record changes nothing and records nothing, so
 * a retried DELETE is harmless. Null when the record does not exist.
 */
export async function deactivateRecord<Rec>(
  db: Database,
  entity: AdminEntity<Rec>,
  key: string,
  options: WriteOptions<Rec>,
): Promise<Rec | null> {
  return db.transaction(async (tx) => {
    const before = await lockRecord(tx, entity, key);
    if (before === null) return null;
    const touch = entity.hasUpdatedAt ? ', updated_at = now()' : '';
    const { rows, rowCount } = await tx.query<Row>(
      `UPDATE ${entity.table} SET active = false${touch} WHERE ${entity.keyColumn} = $1 AND active RETURNING *`,
      [key],
    );
    if (rowCount === 0) return before;
    assert.equal(rowCount, 1, `deactivation of one ${entity.entity} must change one row`);
    const after = entity.fromRow(rows[0] as Row);
    await recordChange(tx, { actor: options.actor, entity: entity.entity, entityId: key, action: 'deactivate', before, after });
    return after;
  });
}

async function lockRecord<Rec>(tx: Sql, entity: AdminEntity<Rec>, key: string): Promise<Rec | null> {
  const { rows } = await tx.query<Row>(`SELECT * FROM ${entity.table} WHERE ${entity.keyColumn} = $1 FOR UPDATE`, [key]);
  const row = rows[0];
  return row === undefined ? null : entity.fromRow(row);
}

/** Columns, `$n` placeholders and parameters for the fields of `input` that the entity knows. */
function assignments<Rec>(entity: AdminEntity<Rec>, input: Readonly<Record<string, unknown>>, paramsBefore: number) {
  const columns: string[] = [];
  const placeholders: string[] = [];
  const params: unknown[] = [];
  for (const [field, spec] of Object.entries(entity.columns)) {
    if (!Object.hasOwn(input, field) || input[field] === undefined) continue;
    const value = input[field];
    params.push(spec.encode === undefined || value === null ? value : spec.encode(value));
    columns.push(spec.column);
    placeholders.push(`$${paramsBefore + params.length}${spec.cast ?? ''}`);
  }
  return { columns, placeholders, params };
}

/** PostgreSQL SQLSTATEs that mean "the request asked for something the table refuses". */
const CHECK_VIOLATION = '23514';
const UNIQUE_VIOLATION = '23505';
const NUMERIC_OUT_OF_RANGE = '22003';

/**
 * The tables' own CHECK constraints (e.g. a route's maxAmount >= minAmount) are the last word on
 * a valid record; their violations are the caller's fault, not a server failure.
 */
async function withConstraintErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const code = sqlState(error);
    if (code === NUMERIC_OUT_OF_RANGE) throw apiError('VALIDATION_ERROR', 'a number is out of range for its column');
    if (code === CHECK_VIOLATION) {
      const constraint = (error as { constraint?: unknown }).constraint;
      throw apiError(
        'VALIDATION_ERROR',
        `the record breaks a rule of its table${typeof constraint === 'string' ? ` (${constraint})` : ''}`,
      );
    }
    if (code === UNIQUE_VIOLATION) throw apiError('CONFLICT', 'a record with this key already exists');
    throw error;
  }
}

function sqlState(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}

/** Readers for the row → API mappers: the column types are fixed by the migrations. */
export const read = {
  id(value: unknown): number {
    assert.ok(typeof value === 'bigint' || typeof value === 'number', 'id column must be an integer');
    return Number(value);
  },
  integer(value: unknown): number {
    assert.ok(typeof value === 'number' && Number.isInteger(value), 'integer column must hold an integer');
    return value;
  },
  /** Money and limits leave the service as decimal strings. */
  bigint(value: unknown): string {
    assert.ok(typeof value === 'bigint' || typeof value === 'number', 'bigint column must be an integer');
    return value.toString();
  },
  string(value: unknown): string {
    assert.ok(typeof value === 'string', 'text column must hold a string');
    return value;
  },
  /** A text column whose CHECK constraint holds it to one of `members`. */
  member<const M extends string>(value: unknown, members: readonly M[]): M {
    const member = members.find((candidate) => candidate === value);
    assert.ok(member !== undefined, `column must hold one of ${members.join(', ')}`);
    return member;
  },
  boolean(value: unknown): boolean {
    assert.ok(typeof value === 'boolean', 'boolean column must hold a boolean');
    return value;
  },
  strings(value: unknown): string[] {
    assert.ok(Array.isArray(value) && value.every((item) => typeof item === 'string'), 'text[] column must hold strings');
    return [...(value as string[])];
  },
  timestamp(value: unknown): string {
    if (value instanceof Date) return value.toISOString();
    assert.ok(typeof value === 'string', 'timestamp column must hold a date');
    return new Date(value).toISOString();
  },
  object(value: unknown): Record<string, unknown> {
    assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), 'jsonb column must hold an object');
    return value as Record<string, unknown>;
  },
} as const;
