import { parseArgs } from 'node:util';
import type { AccountCreated, EntityType } from '@payorch/client';
import { ENTITY_TYPES } from '../domain/model.js';
import { apiContext, COMMON_OPTIONS, integerArg, optionalIntegerArg, parseCommandLine, runRequests } from './api-context.js';
import { type CliIo, type ExitCode, UsageError, unknownSubcommand } from './cli-io.js';
import { formatMoney, type Output } from './output.js';

function entityTypeOf(raw: string | undefined): EntityType {
  if (raw === undefined) return 'user';
  const match = ENTITY_TYPES.find((type) => type === raw);
  if (match === undefined) throw new UsageError(`--entity must be one of ${ENTITY_TYPES.join(', ')} (got ${raw})`);
  return match;
}

function printAccounts(out: Output, created: AccountCreated): void {
  out.show(created, () => {
    if ('accountName' in created) {
      out.record([
        ['accountName', created.accountName],
        ['ledgerAccountId', created.ledgerAccountId],
      ]);
      return;
    }
    out.table(
      [{ header: 'role' }, { header: 'accountName' }, { header: 'ledgerAccountId' }, { header: 'created' }],
      [
        ['primary', created.primary.accountName, created.primary.ledgerAccountId, created.primary.created],
        ['settlement', created.settlement.accountName, created.settlement.ledgerAccountId, created.settlement.created],
      ],
    );
  });
}

/** accounts create USER_ID [--entity user|merchant|agent]; X-User-Id is --user, else USER_ID. */
async function create(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({ args, allowPositionals: true, options: { ...COMMON_OPTIONS, entity: { type: 'string' } } }),
  );
  const [rawUserId, ...rest] = positionals;
  if (rawUserId === undefined || rest.length > 0)
    throw new UsageError('usage: payorch accounts create USER_ID [--entity user|merchant|agent]');
  const userId = integerArg(rawUserId, 'USER_ID');
  const entityType = entityTypeOf(values.entity);
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const created = await context.client.accounts.create({ userId, currency: 'THB', entityType }, { userId: context.userId ?? userId });
    printAccounts(context.out, created);
  });
}

function oneName(positionals: readonly string[], usage: string): string {
  const [name, ...rest] = positionals;
  if (name === undefined || rest.length > 0) throw new UsageError(`usage: payorch ${usage}`);
  return name;
}

async function balance(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() => parseArgs({ args, allowPositionals: true, options: COMMON_OPTIONS }));
  const name = oneName(positionals, 'accounts balance NAME');
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const answer = await context.client.accounts.balance(name);
    context.out.show(answer, () =>
      context.out.record([
        ['accountName', answer.accountName],
        ['balance', formatMoney(answer.balance, answer.currency)],
        ['satang', answer.balance],
      ]),
    );
  });
}

async function history(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({ args, allowPositionals: true, options: { ...COMMON_OPTIONS, limit: { type: 'string' }, offset: { type: 'string' } } }),
  );
  const name = oneName(positionals, 'accounts history NAME [--limit N] [--offset N]');
  const limit = optionalIntegerArg(values.limit, '--limit');
  const offset = optionalIntegerArg(values.offset, '--offset');
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const answer = await context.client.accounts.transactions(name, {
      ...(limit === undefined ? {} : { limit }),
      ...(offset === undefined ? {} : { offset }),
    });
    context.out.show(answer, () =>
      context.out.table(
        [
          { header: 'createdAt' },
          { header: 'operationType' },
          { header: 'direction' },
          { header: 'amount', align: 'right' },
          { header: 'fee', align: 'right' },
          { header: 'intentId' },
        ],
        answer.transactions.map((row) => [
          row.createdAt,
          row.operationType,
          row.direction,
          formatMoney(row.amount, row.currency),
          formatMoney(row.feeAmount, row.currency),
          row.intentId,
        ]),
      ),
    );
  });
}

const STATEMENT_USAGE = 'accounts statement NAME --from ISO8601 --to ISO8601 [--format json|csv|camt053]';

/**
 * accounts statement (docs/rules.md R58): json as a table (or --json), csv and camt053 written to
 * stdout as they arrive, so `> file` holds a statement of any length. stdout is synchronous for
 * files and pipes on Linux, which paces the download to the writes.
 */
async function statement(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({
      args,
      allowPositionals: true,
      options: { ...COMMON_OPTIONS, from: { type: 'string' }, to: { type: 'string' }, format: { type: 'string' } },
    }),
  );
  const name = oneName(positionals, STATEMENT_USAGE);
  const { from, to, format = 'json' } = values;
  if (from === undefined || to === undefined) throw new UsageError(`usage: payorch ${STATEMENT_USAGE}`);
  if (format !== 'json' && format !== 'csv' && format !== 'camt053')
    throw new UsageError(`--format must be json, csv or camt053 (got ${format})`);
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    if (format !== 'json') {
      const file = await context.client.accounts.statement(name, { from, to, format });
      const decoder = new TextDecoder();
      for await (const chunk of file) io.out(decoder.decode(chunk, { stream: true }));
      io.out(decoder.decode());
      return;
    }
    const answer = await context.client.accounts.statement(name, { from, to });
    context.out.show(answer, () => {
      context.out.record([
        ['accountName', answer.accountName],
        ['from', answer.from],
        ['to', answer.to],
        ['openingBalance', formatMoney(answer.openingBalance, answer.currency)],
        ['closingBalance', formatMoney(answer.closingBalance, answer.currency)],
      ]);
      context.out.table(
        [
          { header: 'at' },
          { header: 'operationType' },
          { header: 'direction' },
          { header: 'amount', align: 'right' },
          { header: 'fee', align: 'right' },
          { header: 'balanceAfter', align: 'right' },
          { header: 'intentId' },
        ],
        answer.entries.map((entry) => [
          entry.at,
          entry.operationType ?? '',
          entry.direction,
          formatMoney(entry.amount, answer.currency),
          formatMoney(entry.feeAmount, answer.currency),
          formatMoney(entry.balanceAfter, answer.currency),
          entry.intentId ?? '',
        ]),
      );
    });
  });
}

export async function accountsCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'create':
      return create(rest, io);
    case 'balance':
      return balance(rest, io);
    case 'history':
      return history(rest, io);
    case 'statement':
      return statement(rest, io);
    default:
      throw unknownSubcommand('accounts', sub);
  }
}
