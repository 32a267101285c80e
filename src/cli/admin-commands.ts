import { parseArgs } from 'node:util';
import type { ResolveRequest } from '@payorch/client';
import { apiContext, COMMON_OPTIONS, parseCommandLine, runRequests } from './api-context.js';
import { adminRecordCommand, isAdminRecord } from './admin-records.js';
import { type CliIo, type ExitCode, UsageError, unknownSubcommand } from './cli-io.js';

const RESOLUTIONS: readonly ResolveRequest['resolution'][] = ['CONFIRMED', 'FAILED'];

/** admin resolve ID CONFIRMED|FAILED [--reason TEXT]: settle or fail an intent held in MANUAL_REVIEW. */
async function resolve(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({ args, allowPositionals: true, options: { ...COMMON_OPTIONS, reason: { type: 'string' } } }),
  );
  const [intentId, rawResolution, ...rest] = positionals;
  const resolution = RESOLUTIONS.find((value) => value === rawResolution?.toUpperCase());
  if (intentId === undefined || resolution === undefined || rest.length > 0) {
    throw new UsageError('usage: payorch admin resolve ID CONFIRMED|FAILED [--reason TEXT]');
  }
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const answer = await context.client.admin.resolve(intentId, {
      resolution,
      ...(values.reason === undefined ? {} : { reason: values.reason }),
    });
    context.out.show(answer, () => context.out.record(Object.entries(answer)));
  });
}

/** admin log-level [LEVEL]: read the running process's log level, or switch it. */
async function logLevel(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() => parseArgs({ args, allowPositionals: true, options: COMMON_OPTIONS }));
  const [level, ...rest] = positionals;
  if (rest.length > 0) throw new UsageError('usage: payorch admin log-level [LEVEL]');
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const answer = level === undefined ? await context.client.admin.logLevel.get() : await context.client.admin.logLevel.set(level);
    context.out.show(answer, () => context.out.record(Object.entries(answer)));
  });
}

export async function adminCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const [sub, ...rest] = args;
  if (isAdminRecord(sub)) return adminRecordCommand(sub, rest, io);
  switch (sub) {
    case 'resolve':
      return resolve(rest, io);
    case 'log-level':
      return logLevel(rest, io);
    default:
      throw unknownSubcommand('admin', sub);
  }
}
