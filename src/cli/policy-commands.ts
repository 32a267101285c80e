import { parseArgs } from 'node:util';
import type { PolicyEvaluationRequest } from '@payorch/client';
import {
  apiContext,
  COMMON_OPTIONS,
  jsonObjectArg,
  optionalIntegerArg,
  parseCommandLine,
  runRequests,
  PAYMENT_OPTIONS,
} from './api-context.js';
import { type CliIo, type ExitCode, UsageError, unknownSubcommand } from './cli-io.js';

/**
 * policies evaluate [BODY] --user N --amount N --channel C --app A --type T [--merchant M] [--currency C].
 * Here --user is the user being evaluated (body.userId): the endpoint takes no X-User-Id.
 */
async function evaluate(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...COMMON_OPTIONS,
        ...PAYMENT_OPTIONS,
        channel: { type: 'string' },
        app: { type: 'string' },
        merchant: { type: 'string' },
      },
    }),
  );
  if (positionals.length > 1) throw new UsageError('policies evaluate takes at most one BODY argument');
  const context = apiContext(values, io);
  const merchantId = optionalIntegerArg(values.merchant, '--merchant');
  const flags = Object.entries({
    userId: context.userId,
    merchantId,
    // A string of digits on the wire (minor units): passed through, so large amounts stay exact.
    amount: values.amount,
    currency: values.currency,
    channel: values.channel,
    appId: values.app,
    operationType: values.type,
  }).filter(([, value]) => value !== undefined);
  const merged: Record<string, unknown> = {
    currency: 'THB',
    ...(positionals[0] === undefined ? {} : jsonObjectArg(positionals[0], 'BODY')),
    ...Object.fromEntries(flags),
  };
  const missing = ['userId', 'amount', 'channel', 'appId', 'operationType'].filter((field) => merged[field] === undefined);
  if (missing.length > 0)
    throw new UsageError(`policies evaluate needs ${missing.join(', ')} (--user, --amount, --channel, --app, --type)`);
  // The fields above are present; their formats are the service's to judge (422).
  const body = merged as unknown as PolicyEvaluationRequest;
  return runRequests(context, async () => {
    const decision = await context.client.policies.evaluate(body);
    context.out.show(decision, () =>
      context.out.record([
        ['required', decision.required],
        ['reasonCode', decision.reasonCode],
        ['policyId', decision.policyId],
        ['dailyCumulative', decision.context.dailyCumulative],
        ['isNewPayee', decision.context.isNewPayee],
      ]),
    );
  });
}

export async function policiesCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'evaluate':
      return evaluate(rest, io);
    default:
      throw unknownSubcommand('policies', sub);
  }
}
