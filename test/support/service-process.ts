import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readdir, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../../src/config.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';

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

/** A loopback port nothing listens on now (connects to it are refused until a test starts a server there). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

const mtimeOf = (path: string) =>
  stat(path).then(
    (s) => s.mtimeMs,
    () => 0,
  );

/** The newest .ts under `dir`. */
async function newestSource(dir: string): Promise<number> {
  const files = (await readdir(dir, { recursive: true })).filter((f) => f.endsWith('.ts'));
  return Math.max(0, ...(await Promise.all(files.map((f) => mtimeOf(join(dir, f))))));
}

/** Runs tsc on `project`; a type error elsewhere still emits JavaScript, so only a build that wrote nothing (`output` unchanged) is fatal. */
async function compile(project: string, output: string): Promise<void> {
  const before = await mtimeOf(output);
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', project], { cwd: root }, async (error, stdout) => {
      if ((await mtimeOf(output)) > before) resolve();
      else reject(new Error(`build of ${project} failed: ${error?.message ?? ''}\n${stdout}`));
    });
  });
}

/**
 * Builds what the processes run when a source is newer than it (tsc emits every file, so one
 * stamp stands for all): the client package first, since dist/ imports its build.
 */
export async function buildIfStale(): Promise<void> {
  const clientBuilt = join(root, 'packages/client/dist/index.js');
  if ((await newestSource(join(root, 'packages/client/src'))) > (await mtimeOf(clientBuilt))) {
    await compile('packages/client/tsconfig.json', clientBuilt);
  }
  const serverBuilt = join(root, 'dist/cli/main.js');
  if ((await newestSource(join(root, 'src'))) > (await mtimeOf(serverBuilt))) await compile('tsconfig.build.json', serverBuilt);
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
    // A child that never listened would outlive the test file and hold its port and database.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`service did not start:\n${logs.slice(-20).join('\n')}`));
    }, startupMsMax);
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
