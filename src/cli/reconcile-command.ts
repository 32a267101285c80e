import { parseArgs } from 'node:util';
import { apiContext, COMMON_OPTIONS, parseCommandLine, runRequests } from './api-context.js';
import { type CliIo, EXIT, type ExitCode, UsageError } from './cli-io.js';

const USAGE = 'usage: payorch reconcile --date YYYYMMDD';

/**
 * reconcile --date YYYYMMDD: reconciles the provider's statement of that Bangkok day
 * (POST /admin/reconciliation/runs, docs/rules.md R59) and prints the run and its breaks. Breaks
 * are findings, not a failed request: like audit's violations they exit 4.
 */
export async function reconcileCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({ args, allowPositionals: true, options: { ...COMMON_OPTIONS, date: { type: 'string' } } }),
  );
  if (positionals.length > 0 || values.date === undefined || !/^[0-9]{8}$/.test(values.date)) throw new UsageError(USAGE);
  const date = values.date;
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const run = await context.client.admin.reconciliation.run(date);
    const { out } = context;
    out.show(run, () => {
      out.line(
        `${run.date} ${run.status}: ${run.matched} matched, ${run.breakCount} break(s), ${run.resolved} resolved; ` +
          `provider moved ${run.providerMovement}, books ${run.nostroMovement} (run ${run.runId})`,
      );
      if (run.breaks.length === 0) return;
      out.table(
        [
          { header: 'kind' },
          { header: 'intent' },
          { header: 'line' },
          { header: 'here', align: 'right' },
          { header: 'provider', align: 'right' },
        ],
        run.breaks.map((item) => [item.kind, item.intentId, item.lineId, item.amountHere, item.amountAtProvider]),
      );
    });
    return run.status === 'BALANCED' ? EXIT.OK : EXIT.VIOLATIONS;
  });
}
