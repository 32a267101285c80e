import { setTimeout as delay } from 'node:timers/promises';

/** Where the CLI writes and what it reads from its surroundings; tests pass their own. */
export interface CliIo {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Given to the client; the global fetch when absent. */
  readonly fetch?: typeof fetch;
  /** Between polls of `intents watch` and between retries. */
  readonly sleep?: (ms: number) => Promise<void>;
}

export const processIo: CliIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  env: process.env,
};

export const sleepOf = (io: CliIo): ((ms: number) => Promise<void>) => io.sleep ?? ((ms) => delay(ms));

/** Exit codes say what failed, so scripts can branch on them. */
export const EXIT = {
  OK: 0,
  /** The service refused the request (4xx): the request must change. */
  REFUSED: 1,
  /** Bad command line or local configuration; nothing was sent. */
  USAGE: 2,
  /** The service failed (5xx), did not answer, or did not finish in time. */
  SERVER: 3,
  /** `audit` found broken invariants: the request worked, the data did not. */
  VIOLATIONS: 4,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A problem with the command line; runCli prints it with the usage hint and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A command given no subcommand, or one it does not have. */
export const unknownSubcommand = (command: string, sub: string | undefined) =>
  new UsageError(sub === undefined ? `${command} needs a subcommand` : `unknown command: ${command} ${sub}`);
