import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../../src/config.js';
import { signedHeaders } from '../../src/domain/signing.js';

/** `payorch serve` as a real process (dist/), for tests that kill or run several instances. */

const root = fileURLToPath(new URL('../../', import.meta.url));

export interface ServiceProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** Every line it wrote, stdout and stderr. */
  readonly logs: string[];
  /** Its exit code; null when a signal ended it. */
  readonly exited: Promise<number | null>;
}

/** Builds dist/ when a source file is newer than it (tsc emits every file, so one stamp stands for all). */
export async function buildIfStale(): Promise<void> {
  const built = await stat(join(root, 'dist/cli/main.js')).then(
    (s) => s.mtimeMs,
    () => 0,
  );
  const files = await readdir(join(root, 'src'), { recursive: true });
  const newest = Math.max(
    ...(await Promise.all(files.filter((f) => f.endsWith('.ts')).map(async (f) => (await stat(join(root, 'src', f))).mtimeMs))),
  );
  if (newest <= built) return;
  await new Promise<void>((resolve, reject) => {
    execFile(
      process.execPath,
      [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
      { cwd: root },
      async (error, stdout) => {
        // A type error elsewhere still emits JavaScript; only a build that wrote nothing is fatal here.
        const after = await stat(join(root, 'dist/cli/main.js')).then(
          (s) => s.mtimeMs,
          () => 0,
        );
        if (after > built) resolve();
        else reject(new Error(`build failed: ${error?.message ?? ''}\n${stdout}`));
      },
    );
  });
}

/**
 * Starts `payorch serve` on a free loopback port with `env` over the test's environment (no
 * CONFIG_FILE unless `env` names one: the demo config), and answers once it logs the address it listens on.
 * `bin` is this checkout's command unless a test runs another copy (an installed package).
 */
export async function spawnService(
  env: NodeJS.ProcessEnv,
  startupMsMax: number,
  bin = join(root, 'bin/payorch.js'),
): Promise<ServiceProcess> {
  const fullEnv: NodeJS.ProcessEnv = { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env };
  if (env.CONFIG_FILE === undefined) delete fullEnv.CONFIG_FILE;
  const child = spawn(process.execPath, [bin, 'serve'], { cwd: root, env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start:\n${logs.slice(-20).join('\n')}`)), startupMsMax);
    const onData = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        logs.push(line);
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then((code) => reject(new Error(`service exited (${code}) before listening:\n${logs.slice(-20).join('\n')}`)));
  });
  return { child, url, logs, exited };
}

const walletApiSecret = secretsOf(readConfigFile(DEMO_CONFIG_FILE)).get('wallet-api')?.[0] ?? '';

/** A request to a running service signed as the demo config's wallet-api, with its JSON answer. */
export async function callAsWalletApi(
  url: string,
  method: string,
  path: string,
  options: { readonly user?: number; readonly body?: unknown } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const raw = options.body === undefined ? '' : JSON.stringify(options.body);
  const headers: Record<string, string> = signedHeaders(
    'wallet-api',
    walletApiSecret,
    method,
    path,
    raw,
    options.user === undefined ? {} : { userId: options.user },
  );
  if (raw !== '') headers['content-type'] = 'application/json';
  const response = await fetch(`${url}${path}`, { method, headers, ...(raw === '' ? {} : { body: raw }) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
