import { parseArgs } from 'node:util';
import type { Refund, RefundCreateRequest } from '@payorch/client';
import {
  apiContext,
  COMMON_OPTIONS,
  jsonObjectArg,
  optionalIntegerArg,
  parseCommandLine,
  parseSignedCall,
  requireUser,
  runRequests,
} from './api-context.js';
import { type CliIo, type ExitCode, UsageError, unknownSubcommand } from './cli-io.js';
import { formatMoney, type Output } from './output.js';

/** `payorch refunds create|list` (docs/rules.md R57). */
export async function refundsCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'create':
      return create(rest, io);
    case 'list':
      return list(rest, io);
    default:
      throw unknownSubcommand('refunds', sub);
  }
}

function printRefund(out: Output, refund: Refund): void {
  out.show(refund, () =>
    out.record([
      ['refundId', refund.refundId],
      ['intentId', refund.intentId],
      ['status', refund.status],
      ['amount', formatMoney(refund.amount, refund.currency)],
      ['feeAmount', formatMoney(refund.feeAmount, refund.currency)],
      ['reason', refund.reason],
      ['failureReason', refund.failureReason],
      ['requestedBy', refund.requestedByUserId],
      ['createdAt', refund.createdAt],
    ]),
  );
}

async function create(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseSignedCall(args, {
    amount: { type: 'string' },
    reason: { type: 'string' },
    'refund-fees': { type: 'boolean' },
  });
  const [intentId, ...extra] = positionals;
  if (intentId === undefined || extra.length > 0 || values.reason === undefined)
    throw new UsageError(
      'usage: payorch refunds create INTENT_ID --user N --reason TEXT [--amount N] [--refund-fees] [--metadata JSON] [--key UUID]',
    );
  const context = apiContext(values, io);
  const userId = requireUser(context, 'refunds create');
  const amount = optionalIntegerArg(values.amount, '--amount');
  const body: RefundCreateRequest = {
    reason: values.reason,
    ...(amount === undefined ? {} : { amount }),
    ...(values['refund-fees'] === undefined ? {} : { refundFees: values['refund-fees'] }),
    ...(values.metadata === undefined ? {} : { metadata: jsonObjectArg(values.metadata, '--metadata') }),
    ...(values.key === undefined ? {} : { idempotencyKey: values.key }),
  };
  return runRequests(context, async () => printRefund(context.out, await context.client.refunds.create(intentId, body, { userId })));
}

async function list(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() => parseArgs({ args, allowPositionals: true, options: COMMON_OPTIONS }));
  const [intentId, ...extra] = positionals;
  if (intentId === undefined || extra.length > 0) throw new UsageError('usage: payorch refunds list INTENT_ID');
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const answer = await context.client.refunds.list(intentId);
    const { out } = context;
    out.show(answer, () =>
      out.table(
        [
          { header: 'refundId' },
          { header: 'status' },
          { header: 'amount', align: 'right' },
          { header: 'fees', align: 'right' },
          { header: 'createdAt' },
          { header: 'reason' },
        ],
        answer.refunds.map((r) => [
          r.refundId,
          r.status,
          formatMoney(r.amount, r.currency),
          formatMoney(r.feeAmount, r.currency),
          r.createdAt,
          r.reason,
        ]),
      ),
    );
  });
}
