import type { FastifyRequest } from 'fastify';
import type { App } from '../../typed-app.js';
import Type, { type Static, type TSchema } from 'typebox';
import type { Database } from '../../../adapters/database.js';
import {
  type AdminEntity,
  createRecord,
  deactivateRecord,
  getRecord,
  listRecords,
  updateRecord,
  type WriteOptions,
} from '../../../domain/admin/admin-entity.js';
import { apiError } from '../../../domain/errors.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import { type RouteError, responses } from '../../schemas/shared.js';
import { ListQuery } from '../../schemas/admin.js';

/** A write's own refusals: a duplicate key, a field the schema cannot check (a regular expression, a fee expression). */
const RECORD_WRITE_ERRORS: readonly RouteError[] = ['CONFLICT', 'VALIDATION_ERROR', 'EVAL_ERROR'];
const ADMIN_ROUTE = { config: { auth: 'admin' as const } };
const TAGS = ['admin'];

/**
 * One generic handler serves every record, so its body and key are typed by what all the records'
 * schemas have in common: an object of fields, and a key that is a number or a string. The
 * entity's column map then takes only the fields it knows.
 */
type Input = Readonly<Record<string, unknown>>;
type KeyParams = Readonly<Record<string, number | string>>;

export interface CrudSpec<Rec> {
  /** e.g. '/admin/fee-rules' */
  readonly path: string;
  /** e.g. 'fee rule', for summaries and messages. */
  readonly noun: string;
  /** The list's property, named as the CONFIG_FILE section: 'feeRules'; also names the operations (listFeeRules). */
  readonly listKey: string;
  /** The record in PascalCase, for the operation ids: 'FeeRule' gives createFeeRule, getFeeRule… */
  readonly operationNoun: string;
  readonly entity: AdminEntity<Rec>;
  readonly record: TSchema;
  readonly bodies: { readonly create: TSchema; readonly patch: TSchema };
  /** Path parameter that holds the key: `id` or `serviceId`. */
  readonly keyParam: string;
  readonly params: TSchema;
  /** Checks of the body that a schema cannot express (a regular expression that compiles). */
  readonly checkInput?: (input: Input) => void;
  /** Checks of the record as written, inside the transaction (the fee expression); `input` is the body. */
  readonly checkRecord?: (record: Rec, input: Input) => void | Promise<void>;
}

/**
 * Create, list, read, change and deactivate for one admin-managed table. Nothing is cached:
 * the request that follows a change reads the table again.
 */
export function crudRoutes<Rec>(app: App, db: Database, spec: CrudSpec<Rec>): void {
  createRoute(app, db, spec);
  listRoute(app, db, spec);
  readRoute(app, db, spec);
  changeRoute(app, db, spec);
  deactivateRoute(app, db, spec);
}

type Naming = Pick<CrudSpec<unknown>, 'path' | 'noun' | 'keyParam'>;
const itemPath = (spec: Naming) => `${spec.path}/:${spec.keyParam}`;
const keyOf = (request: FastifyRequest<{ Params: KeyParams }>, spec: Naming) => String(request.params[spec.keyParam]);
const notFound = (spec: Naming, key: string) => apiError('NOT_FOUND', `${spec.noun} ${key} not found`);

function writeOptions<Rec>(request: FastifyRequest, spec: CrudSpec<Rec>, input: Input): WriteOptions<Rec> {
  const { checkRecord } = spec;
  return {
    actor: request.caller.serviceId,
    ...(checkRecord === undefined ? {} : { check: (record: Rec) => checkRecord(record, input) }),
  };
}

function createRoute<Rec>(app: App, db: Database, spec: CrudSpec<Rec>): void {
  app.post<{ Body: Input }>(
    spec.path,
    {
      ...ADMIN_ROUTE,
      schema: {
        tags: TAGS,
        security: ADMIN_SECURITY,
        operationId: `create${spec.operationNoun}`,
        summary: `Create a ${spec.noun}`,
        body: spec.bodies.create,
        response: responses({ 201: spec.record }, RECORD_WRITE_ERRORS),
      },
    },
    async (request, reply) => {
      const input = request.body;
      spec.checkInput?.(input);
      const created = await createRecord(db, spec.entity, input, writeOptions(request, spec, input));
      return reply.status(201).send(created);
    },
  );
}

function listRoute<Rec>(app: App, db: Database, spec: CrudSpec<Rec>): void {
  app.get<{ Querystring: Static<typeof ListQuery> }>(
    spec.path,
    {
      ...ADMIN_ROUTE,
      schema: {
        tags: TAGS,
        security: ADMIN_SECURITY,
        operationId: `list${spec.listKey[0]?.toUpperCase()}${spec.listKey.slice(1)}`,
        summary: `List ${spec.noun}s`,
        querystring: ListQuery,
        response: responses({ 200: Type.Object({ [spec.listKey]: Type.Array(spec.record) }) }, []),
      },
    },
    async (request) => {
      const { query } = request;
      const records = await listRecords(db, spec.entity, { active: query.active, limit: query.limit, offset: query.offset });
      return { [spec.listKey]: records };
    },
  );
}

function readRoute<Rec>(app: App, db: Database, spec: CrudSpec<Rec>): void {
  app.get<{ Params: KeyParams }>(
    itemPath(spec),
    {
      ...ADMIN_ROUTE,
      schema: {
        tags: TAGS,
        security: ADMIN_SECURITY,
        operationId: `get${spec.operationNoun}`,
        summary: `Read a ${spec.noun}`,
        params: spec.params,
        response: responses({ 200: spec.record }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const key = keyOf(request, spec);
      const record = await getRecord(db, spec.entity, key);
      if (record === null) throw notFound(spec, key);
      return record;
    },
  );
}

function changeRoute<Rec>(app: App, db: Database, spec: CrudSpec<Rec>): void {
  app.patch<{ Body: Input; Params: KeyParams }>(
    itemPath(spec),
    {
      ...ADMIN_ROUTE,
      schema: {
        tags: TAGS,
        security: ADMIN_SECURITY,
        operationId: `update${spec.operationNoun}`,
        summary: `Change fields of a ${spec.noun} (absent fields keep their value)`,
        params: spec.params,
        body: spec.bodies.patch,
        response: responses({ 200: spec.record }, ['NOT_FOUND', ...RECORD_WRITE_ERRORS]),
      },
    },
    async (request) => {
      const key = keyOf(request, spec);
      const patch = request.body;
      spec.checkInput?.(patch);
      const updated = await updateRecord(db, spec.entity, key, patch, writeOptions(request, spec, patch));
      if (updated === null) throw notFound(spec, key);
      return updated;
    },
  );
}

function deactivateRoute<Rec>(app: App, db: Database, spec: CrudSpec<Rec>): void {
  app.delete<{ Params: KeyParams }>(
    itemPath(spec),
    {
      ...ADMIN_ROUTE,
      schema: {
        tags: TAGS,
        security: ADMIN_SECURITY,
        operationId: `deactivate${spec.operationNoun}`,
        summary: `Deactivate a ${spec.noun} (active = false; the record is kept)`,
        params: spec.params,
        response: responses({ 200: spec.record }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const key = keyOf(request, spec);
      const deactivated = await deactivateRecord(db, spec.entity, key, { actor: request.caller.serviceId });
      if (deactivated === null) throw notFound(spec, key);
      return deactivated;
    },
  );
}
