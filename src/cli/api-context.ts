import { readFileSync } from 'node:fs';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { DEMO_CONFIG_FILE, ConfigError, readConfigFile, secretsOf } from '../config.js';
import { createPayorchClient, type PayorchClient, PayorchConnectionError, type PayorchCredentials, PayorchError } from '@payorch/client';
import { type CliIo, EXIT, type ExitCode, sleepOf, UsageError } from './cli-io.js';
import { Output } from './output.js';

/** Options every command that talks to the service takes; spread into each command's parseArgs options. */
export const COMMON_OPTIONS = {
  service: { type: 'string' },
  'admin-token': { type: 'string' },
  user: { type: 'string' },
  url: { type: 'string' },
  json: { type: 'boolean', default: false },
  'legacy-signature': { type: 'boolean', default: false },
} as const;

/** The options of every command that names a payment: its operation type, amount and currency. */
export const PAYMENT_OPTIONS = {
  type: { type: 'string' },
  amount: { type: 'string' },
  currency: { type: 'string' },
} as const;

/**
 * The command line of a signed call that stores something under an idempotency key (intents
 * create, refunds create): COMMON_OPTIONS, `--metadata JSON` and `--key UUID`, and the command's
 * own options; its complaints are usage errors (exit 2).
 */
const SIGNED_CALL_OPTIONS = { ...COMMON_OPTIONS, metadata: { type: 'string' }, key: { type: 'string' } } as const;

type OptionsConfig = NonNullable<ParseArgsConfig['options']>;
type SignedCallLine<Own extends OptionsConfig> = ReturnType<
  typeof parseArgs<{ args: string[]; allowPositionals: true; options: typeof SIGNED_CALL_OPTIONS & Own }>
>;

export function parseSignedCall<const Own extends OptionsConfig>(args: string[], own: Own): SignedCallLine<Own> {
  return parseCommandLine(() => parseArgs({ args, allowPositionals: true, options: { ...SIGNED_CALL_OPTIONS, ...own } }));
}

export interface CommonValues {
  readonly service?: string | undefined;
  /** The admin bearer token (ADMIN_TOKEN), sent instead of a signature when no service is named. */
  readonly 'admin-token'?: string | undefined;
  readonly user?: string | undefined;
  readonly url?: string | undefined;
  readonly json?: boolean | undefined;
  /** Sign with the older X-Signature (docs/rules.md R1) instead of an HTTP Message Signature. */
  readonly 'legacy-signature'?: boolean | undefined;
}

export interface ApiContext {
  readonly client: PayorchClient;
  readonly out: Output;
  readonly io: CliIo;
  readonly baseUrl: string;
  /** --user: X-User-Id where the endpoint acts for a user. */
  readonly userId: number | undefined;
}

/** parseArgs reports a bad command line with these codes; anything else is a bug and propagates. */
const PARSE_ERROR_CODES = new Set([
  'ERR_PARSE_ARGS_UNKNOWN_OPTION',
  'ERR_PARSE_ARGS_INVALID_OPTION_VALUE',
  'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL',
]);

/** Runs node:util parseArgs and turns its complaints into usage errors (exit 2). */
export function parseCommandLine<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && PARSE_ERROR_CODES.has(code)) throw new UsageError((error as Error).message);
    throw error;
  }
}

export function integerArg(raw: string, name: string): number {
  const value = Number(raw);
  if (!/^-?[0-9]+$/.test(raw) || !Number.isSafeInteger(value)) throw new UsageError(`${name} must be an integer (got ${raw})`);
  return value;
}

export function optionalIntegerArg(raw: string | undefined, name: string): number | undefined {
  return raw === undefined ? undefined : integerArg(raw, name);
}

/** A JSON object given on the command line (a body or --metadata). */
export function jsonObjectArg(raw: string, name: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new UsageError(`${name} is not JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new UsageError(`${name} must be a JSON object`);
  return parsed as Record<string, unknown>;
}

export function baseUrlOf(values: CommonValues, env: CliIo['env']): string {
  return values.url ?? env.PAYORCH_URL ?? `http://${env.HOST || '127.0.0.1'}:${env.PORT || '3000'}`;
}

/**
 * The signing secret: PAYORCH_SECRET, else the first line of the file PAYORCH_SECRET_FILE names (a
 * mounted secret), else the service's own from CONFIG_FILE (the demo config by default), as the
 * service itself reads it. A client machine thus needs its one secret, not the server's config.
 */
function secretOf(serviceId: string, env: CliIo['env']): string {
  if (env.PAYORCH_SECRET) return env.PAYORCH_SECRET;
  if (env.PAYORCH_SECRET_FILE) return secretFromFile(env.PAYORCH_SECRET_FILE);
  const path = env.CONFIG_FILE || DEMO_CONFIG_FILE;
  let secret: string | undefined;
  try {
    secret = secretsOf(readConfigFile(path)).get(serviceId)?.[0];
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
  if (secret === undefined) throw new UsageError(`no secret for service ${serviceId} in CONFIG_FILE (${path})`);
  return secret;
}

function secretFromFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`PAYORCH_SECRET_FILE ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const secret = text.split(/\r?\n/, 1)[0]?.trim() ?? '';
  if (secret === '') throw new UsageError(`PAYORCH_SECRET_FILE ${path} holds no secret on its first line`);
  return secret;
}

/** A named service signs (its secret as secretOf finds it); with none named, the admin token is sent. */
function credentialsOf(values: CommonValues, env: CliIo['env']): PayorchCredentials {
  const serviceId = values.service ?? env.PAYORCH_SERVICE;
  if (serviceId !== undefined && serviceId !== '') {
    return {
      serviceId,
      secret: secretOf(serviceId, env),
      signatureScheme: values['legacy-signature'] === true ? 'x-signature' : 'message',
    };
  }
  const adminToken = values['admin-token'] ?? env.PAYORCH_ADMIN_TOKEN;
  if (adminToken !== undefined && adminToken !== '') return { adminToken };
  throw new UsageError('--service ID is required (or PAYORCH_SERVICE), or --admin-token for the admin commands (or PAYORCH_ADMIN_TOKEN)');
}

export function apiContext(values: CommonValues, io: CliIo): ApiContext {
  const credentials = credentialsOf(values, io.env);
  const userId = optionalIntegerArg(values.user, '--user');
  if (userId !== undefined && userId < 0) throw new UsageError('--user must be >= 0');
  const baseUrl = baseUrlOf(values, io.env);
  const client = createPayorchClient({
    ...credentials,
    baseUrl,
    sleep: sleepOf(io),
    ...(io.fetch === undefined ? {} : { fetch: io.fetch }),
  });
  return { client, out: new Output(io, values.json === true), io, baseUrl, userId };
}

export function requireUser(context: ApiContext, command: string): number {
  if (context.userId === undefined) throw new UsageError(`${command} needs --user N (X-User-Id)`);
  return context.userId;
}

/** Prints a failed request and says which exit code it earns: 1 for a refusal (4xx), 3 for a server failure or no answer. */
export function reportFailure(context: Pick<ApiContext, 'out' | 'io'>, error: unknown): ExitCode {
  if (error instanceof PayorchError) {
    if (context.out.json) context.out.value(error.body);
    const detail = typeof error.body === 'object' && error.body.detail !== undefined ? ` ${JSON.stringify(error.body.detail)}` : '';
    context.io.err(`payorch: ${error.message}${detail}\n`);
    return error.status >= 500 ? EXIT.SERVER : EXIT.REFUSED;
  }
  if (error instanceof PayorchConnectionError) {
    // Not a service code: the CLI's own word for "no answer", so --json output always parses.
    if (context.out.json) context.out.value({ error: 'UNREACHABLE', message: error.message });
    context.io.err(`payorch: ${error.message}\n`);
    return EXIT.SERVER;
  }
  throw error;
}

/** Runs the command's requests; a refused or failed request becomes its exit code. */
// biome-ignore lint/suspicious/noConfusingVoidType: a command's work that returns nothing succeeded; `undefined` would make every such callback say so
export async function runRequests(context: ApiContext, work: () => Promise<ExitCode | void>): Promise<ExitCode> {
  try {
    return (await work()) ?? EXIT.OK;
  } catch (error) {
    return reportFailure(context, error);
  }
}
