import { parseArgs } from 'node:util';
import { ADMIN_COLLECTION_PATHS, type ClientRequest } from '@payorch/client';
import {
  type ApiContext,
  apiContext,
  COMMON_OPTIONS,
  jsonObjectArg,
  optionalIntegerArg,
  parseCommandLine,
  runRequests,
} from './api-context.js';
import { type CliIo, type ExitCode, UsageError, unknownSubcommand } from './cli-io.js';

export type AdminRecordName = keyof typeof ADMIN_COLLECTION_PATHS;

export const isAdminRecord = (name: string | undefined): name is AdminRecordName =>
  name !== undefined && Object.hasOwn(ADMIN_COLLECTION_PATHS, name);

const usage = (name: string) =>
  `usage: payorch admin ${name} list [--active true|false] [--limit N] [--offset N] | get KEY | create BODY | update KEY BODY | delete KEY`;

/** Scalar fields as table columns; objects and lists are for --json or a single record. */
function listTable(context: ApiContext, records: readonly Record<string, unknown>[]): void {
  const first = records[0];
  if (first === undefined) {
    context.out.line('(none)');
    return;
  }
  const fields = Object.keys(first).filter((field) => typeof first[field] !== 'object' || first[field] === null);
  context.out.table(
    fields.map((header) => ({ header })),
    records.map((record) => fields.map((field) => record[field])),
  );
}

const recordOf = (body: unknown): Record<string, unknown> =>
  typeof body === 'object' && body !== null && !Array.isArray(body) ? Object.fromEntries(Object.entries(body)) : {};

/** admin RECORDS list|get|create|update|delete: the admin API's records, one request each. */
export async function adminRecordCommand(name: AdminRecordName, args: string[], io: CliIo): Promise<ExitCode> {
  const [verb, ...rest] = args;
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({
      args: rest,
      allowPositionals: true,
      options: { ...COMMON_OPTIONS, active: { type: 'string' }, limit: { type: 'string' }, offset: { type: 'string' } },
    }),
  );
  const path = ADMIN_COLLECTION_PATHS[name];
  const item = (key: string | undefined) => {
    if (key === undefined || key === '') throw new UsageError(usage(name));
    return `${path}/${encodeURIComponent(key)}`;
  };
  const body = (raw: string | undefined) => {
    if (raw === undefined) throw new UsageError(usage(name));
    return jsonObjectArg(raw, 'BODY');
  };
  const [first, second, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(usage(name));
  let request: ClientRequest;
  switch (verb) {
    case 'list': {
      if (values.active !== undefined && values.active !== 'true' && values.active !== 'false')
        throw new UsageError('--active must be true or false');
      const query = new URLSearchParams();
      if (values.active !== undefined) query.set('active', values.active);
      const limit = optionalIntegerArg(values.limit, '--limit');
      const offset = optionalIntegerArg(values.offset, '--offset');
      if (limit !== undefined) query.set('limit', String(limit));
      if (offset !== undefined) query.set('offset', String(offset));
      const search = query.toString();
      request = { method: 'GET', path: `${path}${search === '' ? '' : `?${search}`}`, retry: true };
      break;
    }
    case 'get':
      request = { method: 'GET', path: item(first), retry: true };
      break;
    // A create repeated after a lost answer would make a second record: never retried.
    case 'create':
      request = { method: 'POST', path: path, json: body(first), retry: false };
      break;
    // The same PATCH twice leaves the same record; so does a second deactivate.
    case 'update':
      request = { method: 'PATCH', path: item(first), json: body(second), retry: true };
      break;
    case 'delete':
      request = { method: 'DELETE', path: item(first), retry: true };
      break;
    default:
      throw unknownSubcommand(`admin ${name}`, verb);
  }
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const answer = recordOf((await context.client.request(request)).body);
    if (verb === 'list') {
      // A list answers under the record's plural ({"feeRules": [...]}): its one array.
      const list = Object.values(answer).find(Array.isArray);
      const records = Array.isArray(list) ? list.map(recordOf) : [];
      context.out.show(answer, () => listTable(context, records));
    } else {
      context.out.show(answer, () => context.out.record(Object.entries(answer)));
    }
  });
}
