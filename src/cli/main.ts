import { openDatabase } from '../adapters/database.js';
import { MigrationChangedError, type MigrationStatus, migrate, migrationStatus } from '../adapters/migrations.js';
import { loadConfig } from '../config.js';
import { startService } from '../main.js';
import { flushTraces } from '../adapters/tracing.js';
import { accountsCommand } from './account-commands.js';
import { adminCommand } from './admin-commands.js';
import { auditCommand } from './audit-command.js';
import { callCommand } from './call-command.js';
import { completionCommand } from './completion.js';
import { type CliIo, EXIT, processIo, UsageError } from './cli-io.js';
import { intentsCommand, quoteCommand } from './intent-commands.js';
import { VERSION } from '../version.js';
import { policiesCommand } from './policy-commands.js';

export { type CliIo, EXIT, processIo } from './cli-io.js';

const USAGE = `payorch: payment orchestration service

Usage:
  payorch --version                     print the version
  payorch COMMAND --help                print one command's usage
  payorch serve                         run the API and the workers (what npm start runs); PAYORCH_ROLE=api
                                        or workers runs one part, MIGRATE_ON_START=false skips migrating
  payorch migrate [--status]            apply the SQL migrations to DATABASE_URL (or the embedded database);
                                        --status lists applied and pending ones, exit 1 when any is pending
  payorch call METHOD PATH [BODY]       sign any request and print the answer as is

  payorch intents create [BODY] --user N --type T --amount N [--recipient N] [--currency C]
                         [--from-account NAME] [--to-account NAME] [--to-ledger-account UUID]
                         [--external-ref X] [--comment X] [--metadata JSON] [--key UUID]
  payorch intents get ID
  payorch intents events ID
  payorch intents watch ID [--interval-ms N] [--timeout-s N] [--poll]
                                        print each new status until a final one or MANUAL_REVIEW
  payorch quote [BODY] --type T --amount N [--currency C] [--metadata JSON]
  payorch accounts create USER_ID [--entity user|merchant|agent]
  payorch accounts balance NAME
  payorch accounts history NAME [--limit N] [--offset N]
  payorch accounts statement NAME --from ISO8601 --to ISO8601 [--format json|csv|camt053]   (csv, camt053: > file)
  payorch policies evaluate [BODY] --user N --amount N --channel C --app A --type T [--merchant N]
  payorch admin resolve ID CONFIRMED|FAILED [--reason TEXT]
  payorch admin RECORDS list [--active true|false] [--limit N] [--offset N]
  payorch admin RECORDS get KEY | create BODY | update KEY BODY | delete KEY
                                        RECORDS: fee-rules, routes, limit-rules, auth-policies,
                                        service-keys; delete deactivates (records are kept)
  payorch admin log-level [LEVEL]       read the running process's log level, or switch it
  payorch audit [--since ISO-8601]      the invariant audit of the running service (admin key)
  payorch completion bash|zsh           print the shell completion script (eval it in ~/.bashrc or ~/.zshrc)

Options of every command that calls the service:
  --service ID   sign as this service (or PAYORCH_SERVICE), with the secret in PAYORCH_SECRET, else
                 the first line of the file PAYORCH_SECRET_FILE names, else its own in CONFIG_FILE
  --admin-token T
                 with no service named: send ADMIN_TOKEN as a bearer token instead of signing
                 (or PAYORCH_ADMIN_TOKEN); the admin commands (admin, audit) accept it
  --user N       X-User-Id, the user the request acts for
  --url URL      the service (default PAYORCH_URL, else http://HOST:PORT)
  --json         print the service's JSON instead of tables (watch: one JSON line per status)
  --legacy-signature
                 sign with the older X-Signature instead of an HTTP Message Signature
BODY is a JSON object; the flags override its fields. Amounts are satang (1 THB = 100).

Environment: see README.md (PORT, DATABASE_URL, CONFIG_FILE, ...).
Exit codes: 0 success; 1 the service refused the request (4xx); 2 usage or local configuration
error; 3 server error (5xx), no answer, or watch timed out; 4 audit found violations.
`;

const COMMON_OPTIONS_HELP = USAGE.slice(USAGE.indexOf('Options of every command'), USAGE.indexOf('Environment:'));
const HELP_FLAGS: ReadonlySet<string> = new Set(['--help', '-h']);

/**
 * The usage of one command, cut from USAGE so the two cannot disagree: its lines (with their
 * continuation lines) and the options every calling command takes. Null for an unknown command.
 */
export function commandUsage(command: string): string | null {
  const lines = USAGE.split('\n');
  const picked: string[] = [];
  let inCommand = false;
  for (const line of lines) {
    if (line.startsWith('  payorch ')) inCommand = line.startsWith(`  payorch ${command} `) || line === `  payorch ${command}`;
    else if (!line.startsWith('                 ')) inCommand = false;
    if (inCommand) picked.push(line);
  }
  if (picked.length === 0) return null;
  const calls = !['serve', 'migrate', 'completion'].includes(command);
  return `Usage:\n${picked.join('\n')}\n${calls ? `\n${COMMON_OPTIONS_HELP}` : ''}`;
}

async function serve(): Promise<void> {
  const service = await startService(loadConfig());
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    service.app.log.info({ signal }, 'shutting down');
    await service.close();
    await flushTraces().catch((error: unknown) => service.app.log.warn({ err: error }, 'buffered spans could not be exported'));
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

async function migrateCommand(args: readonly string[], io: CliIo): Promise<number> {
  const statusOnly = args[0] === '--status';
  if (args.length > (statusOnly ? 1 : 0)) throw new UsageError('usage: payorch migrate [--status]');
  const config = loadConfig();
  const db = await openDatabase(config.databaseUrl, config.dataDir, config.databasePoolMode);
  try {
    if (statusOnly) return printMigrationStatus(await migrationStatus(db), io);
    const applied = await migrate(db);
    io.out(`${applied.length === 0 ? 'database is up to date' : `applied ${applied.join(', ')}`}\n`);
    return EXIT.OK;
  } catch (error) {
    if (!(error instanceof MigrationChangedError)) throw error;
    io.err(`payorch: ${error.message}\n`);
    return EXIT.USAGE;
  } finally {
    await db.close();
  }
}

/** Exit 1 when anything is pending, so a deployment step can wait on it or stop. */
function printMigrationStatus(status: MigrationStatus, io: CliIo): number {
  for (const { version, appliedAt } of status.applied) io.out(`applied  ${version}  ${appliedAt.toISOString()}\n`);
  for (const version of status.pending) io.out(`pending  ${version}\n`);
  io.out(status.pending.length === 0 ? 'database is up to date\n' : `${status.pending.length} pending\n`);
  return status.pending.length === 0 ? EXIT.OK : EXIT.REFUSED;
}

async function dispatch(command: string, args: string[], io: CliIo): Promise<number> {
  switch (command) {
    case 'serve':
      await serve();
      return EXIT.OK;
    case 'migrate':
      return migrateCommand(args, io);
    case 'call':
      return callCommand(args, io);
    case 'intents':
      return intentsCommand(args, io);
    case 'quote':
      return quoteCommand(args, io);
    case 'accounts':
      return accountsCommand(args, io);
    case 'policies':
      return policiesCommand(args, io);
    case 'admin':
      return adminCommand(args, io);
    case 'audit':
      return auditCommand(args, io);
    case 'completion':
      return completionCommand(args, io);
    default:
      throw new UsageError(`unknown command: ${command}`);
  }
}

/**
 * The `payorch` command. `io` receives all output, so tests run commands in-process; the exit
 * code is returned, never passed to process.exit (bin/payorch.js does that).
 */
export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || HELP_FLAGS.has(command)) {
    io.out(USAGE);
    return EXIT.OK;
  }
  if (command === '--version' || command === 'version') {
    io.out(`payorch ${VERSION}\n`);
    return EXIT.OK;
  }
  const usage = commandUsage(command);
  if (usage !== null && rest.some((arg) => HELP_FLAGS.has(arg))) {
    io.out(usage);
    return EXIT.OK;
  }
  try {
    return await dispatch(command, rest, io);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    const hint = usage === null ? "Run 'payorch help' for the commands and options." : `Run 'payorch ${command} --help' for its usage.`;
    io.err(`payorch: ${error.message}\n${hint}\n`);
    return EXIT.USAGE;
  }
}
