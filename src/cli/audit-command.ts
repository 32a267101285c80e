import { parseArgs } from 'node:util';
import { apiContext, COMMON_OPTIONS, parseCommandLine, runRequests } from './api-context.js';
import { type CliIo, EXIT, type ExitCode, UsageError } from './cli-io.js';

/**
 * audit [--since ISO]: the invariant audit of the running service (GET /admin/audit, an admin
 * key). Violations are findings, not a failed request, so they get their own exit code (4).
 */
export async function auditCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() =>
    parseArgs({ args, allowPositionals: true, options: { ...COMMON_OPTIONS, since: { type: 'string' } } }),
  );
  if (positionals.length > 0) throw new UsageError('usage: payorch audit [--since ISO-8601] --service ID');
  const context = apiContext(values, io);
  return runRequests(context, async () => {
    const result = await context.client.admin.audit(values.since === undefined ? {} : { since: values.since });
    const { out } = context;
    out.show(result, () => {
      out.line(
        result.ok
          ? `ok: every invariant holds (checked at ${result.checkedAt})`
          : `${result.violations.length} violation(s) (checked at ${result.checkedAt})`,
      );
      if (result.ok) return;
      out.table(
        [{ header: 'check' }, { header: 'intent/account' }, { header: 'detail' }],
        result.violations.map((violation) => [violation.check, violation.intentId ?? violation.account, violation.detail]),
      );
    });
    return result.ok ? EXIT.OK : EXIT.VIOLATIONS;
  });
}
