import { parseArgs } from 'node:util';
import type { Intent, IntentCreated, IntentCreateRequest, OperationType, Quote, QuoteRequest } from '@payorch/client';
import { OPERATION_TYPES } from '../domain/model.js';
import {
  apiContext,
  COMMON_OPTIONS,
  jsonObjectArg,
  optionalIntegerArg,
  PAYMENT_OPTIONS,
  parseCommandLine,
  parseSignedCall,
  requireUser,
  runRequests,
} from './api-context.js';
import { type CliIo, type ExitCode, UsageError, unknownSubcommand } from './cli-io.js';
import { formatMoney, type Output } from './output.js';
import { watchIntent } from './watch-intent.js';

const isOperationType = (value: unknown): value is OperationType => (OPERATION_TYPES as readonly unknown[]).includes(value);

function operationTypeOf(value: unknown): OperationType {
  if (!isOperationType(value)) throw new UsageError(`--type must be one of ${OPERATION_TYPES.join(', ')} (got ${String(value)})`);
  return value;
}

function amountOf(value: unknown): number {
  // The service judges the range (422); here only what cannot be sent as a JSON integer is refused.
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new UsageError('--amount N (satang, an integer) is required');
  return value;
}

/** Drops the flags that were not given, so they do not override the BODY argument. */
function given(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

export function printCreated(out: Output, created: IntentCreated): void {
  out.show(created, () =>
    out.record([
      ['intentId', created.intentId],
      ['status', created.status],
      ['channel', created.channel],
      ['preFee', formatMoney(created.preFeeAmount, created.currency)],
      ['postFee', formatMoney(created.postFeeAmount, created.currency)],
      ['requiresMonitoring', created.requiresMonitoring],
      ['createdAt', created.createdAt],
      ...(created.expiresAt === undefined ? [] : [['expiresAt', created.expiresAt] as const]),
      ...(created.qrSignature === undefined ? [] : [['qrSignature', created.qrSignature] as const]),
      ['version', created.version],
    ]),
  );
}

export function printIntent(out: Output, intent: Intent): void {
  out.show(intent, () =>
    out.record([
      ['intentId', intent.intentId],
      ['status', intent.status],
      ['operationType', intent.operationType],
      ['channel', intent.channel],
      ['amount', formatMoney(intent.amount, intent.currency)],
      ['preFee', formatMoney(intent.preFeeAmount, intent.currency)],
      ['postFee', formatMoney(intent.postFeeAmount, intent.currency)],
      ['from', intent.fromAccount],
      ['to', intent.toAccount],
      ['failureReason', intent.failureReason],
      ['version', intent.version],
      ['createdAt', intent.createdAt],
      ['updatedAt', intent.updatedAt],
    ]),
  );
}

async function create(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseSignedCall(args, {
    ...PAYMENT_OPTIONS,
    recipient: { type: 'string' },
    'from-account': { type: 'string' },
    'to-account': { type: 'string' },
    'to-ledger-account': { type: 'string' },
    'external-ref': { type: 'string' },
    comment: { type: 'string' },
  });
  if (positionals.length > 1) throw new UsageError('intents create takes at most one BODY argument');
  const context = apiContext(values, io);
  const userId = requireUser(context, 'intents create');
  const merged: Record<string, unknown> = {
    ...(positionals[0] === undefined ? {} : jsonObjectArg(positionals[0], 'BODY')),
    ...given({
      operationType: values.type,
      amount: optionalIntegerArg(values.amount, '--amount'),
      currency: values.currency,
      recipientUserId: optionalIntegerArg(values.recipient, '--recipient'),
      fromAccountName: values['from-account'],
      toAccountName: values['to-account'],
      toLedgerAccountId: values['to-ledger-account'],
      externalRef: values['external-ref'],
      comment: values.comment,
      metadata: values.metadata === undefined ? undefined : jsonObjectArg(values.metadata, '--metadata'),
      idempotencyKey: values.key,
    }),
  };
  // Type and amount are checked here so a typo is a usage error; the service validates the rest.
  const body = { ...merged, operationType: operationTypeOf(merged.operationType), amount: amountOf(merged.amount) } as IntentCreateRequest;
  return runRequests(context, async () => printCreated(context.out, await context.client.intents.create(body, { userId })));
}

/** One positional ID and the common options. */
function idCommand(args: string[], io: CliIo, usage: string) {
  const { values, positionals } = parseCommandLine(() => parseArgs({ args, allowPositionals: true, options: COMMON_OPTIONS }));
  const [id, ...rest] = positionals;
  if (id === undefined || rest.length > 0) throw new UsageError(`usage: payorch ${usage}`);
  return { id, context: apiContext(values, io) };
}

async function get(args: string[], io: CliIo): Promise<ExitCode> {
  const { id, context } = idCommand(args, io, 'intents get ID');
  return runRequests(context, async () => printIntent(context.out, await context.client.intents.get(id)));
}

async function events(args: string[], io: CliIo): Promise<ExitCode> {
  const { id, context } = idCommand(args, io, 'intents events ID');
  return runRequests(context, async () => {
    const answer = await context.client.intents.events(id);
    const { out } = context;
    out.show(answer, () =>
      out.table(
        [{ header: 'id', align: 'right' }, { header: 'createdAt' }, { header: 'from' }, { header: 'to' }, { header: 'reason' }],
        answer.events.map((event) => [event.id, event.createdAt, event.statusFrom, event.statusTo, event.reason]),
      ),
    );
  });
}

/** Polls no faster than this, whatever --interval-ms says: a watch must not load the service. */
export const WATCH_INTERVAL_MS_MIN = 10;
export const WATCH_INTERVAL_MS_DEFAULT = 1_000;
export const WATCH_TIMEOUT_S_DEFAULT = 600;

async function watch(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...COMMON_OPTIONS,
        'interval-ms': { type: 'string' },
        'timeout-s': { type: 'string' },
        poll: { type: 'boolean', default: false },
      },
    }),
  );
  const [id, ...rest] = positionals;
  if (id === undefined || rest.length > 0)
    throw new UsageError('usage: payorch intents watch ID [--interval-ms N] [--timeout-s N] [--poll]');
  const intervalMs = optionalIntegerArg(values['interval-ms'], '--interval-ms') ?? WATCH_INTERVAL_MS_DEFAULT;
  const timeoutS = optionalIntegerArg(values['timeout-s'], '--timeout-s') ?? WATCH_TIMEOUT_S_DEFAULT;
  if (intervalMs < WATCH_INTERVAL_MS_MIN) throw new UsageError(`--interval-ms must be >= ${WATCH_INTERVAL_MS_MIN}`);
  if (timeoutS < 1) throw new UsageError('--timeout-s must be >= 1');
  const context = apiContext(values, io);
  return runRequests(context, () => watchIntent(context, id, { intervalMs, timeoutMs: timeoutS * 1000, stream: !values.poll }));
}

export function printQuote(out: Output, quote: Quote, currency: string): void {
  out.show(quote, () => {
    out.record([
      ['fee', formatMoney(quote.fee, currency)],
      ['totalCharge', formatMoney(quote.totalCharge, currency)],
    ]);
    if (quote.breakdown.length === 0) return;
    out.line('');
    out.table(
      [{ header: 'account' }, { header: 'amount', align: 'right' }],
      quote.breakdown.map((split) => [split.account, formatMoney(split.amount, currency)]),
    );
  });
}

export async function quoteCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...COMMON_OPTIONS,
        ...PAYMENT_OPTIONS,
        metadata: { type: 'string' },
      },
    }),
  );
  if (positionals.length > 1) throw new UsageError('quote takes at most one BODY argument');
  const merged: Record<string, unknown> = {
    ...(positionals[0] === undefined ? {} : jsonObjectArg(positionals[0], 'BODY')),
    ...given({
      operationType: values.type,
      amount: optionalIntegerArg(values.amount, '--amount'),
      currency: values.currency,
      metadata: values.metadata === undefined ? undefined : jsonObjectArg(values.metadata, '--metadata'),
    }),
  };
  const context = apiContext(values, io);
  // NFC_CHARGE passes as a type here; the service answers it with 422, which is the rule's owner.
  const body = { ...merged, operationType: operationTypeOf(merged.operationType), amount: amountOf(merged.amount) } as QuoteRequest;
  return runRequests(context, async () => printQuote(context.out, await context.client.intents.quote(body), body.currency ?? 'THB'));
}

export async function intentsCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'create':
      return create(rest, io);
    case 'get':
      return get(rest, io);
    case 'events':
      return events(rest, io);
    case 'watch':
      return watch(rest, io);
    default:
      throw unknownSubcommand('intents', sub);
  }
}
