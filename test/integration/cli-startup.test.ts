import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildIfStale } from '../support/service-process.js';

/**
 * `npm start` compiled TypeScript on every start, and every CLI call (even
 * `--version`) loaded the whole server. The start's build step now compiles only when a source
 * changed, and a command imports only its own modules. Measured, not asserted (a timed test on a
 * shared machine is noise): the figures are in docs/OPERATIONS.md §1.
 */

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const built = join(root, 'dist/cli/main.js');

/**
 * The CommonJS packages a CLI call loaded: pg, Fastify, ioredis and PGlite's wrapper are CommonJS
 * or load through require, so they show in require.cache once anything imported them.
 */
async function packagesLoadedBy(args: readonly string[]): Promise<{ output: string; loaded: string[] }> {
  const script = `
    import { createRequire } from 'node:module';
    const { runCli } = await import(${JSON.stringify(built)});
    let output = '';
    await runCli(${JSON.stringify(args)}, { out: (text) => { output += text; }, err: (text) => { output += text; } });
    const loaded = Object.keys(createRequire(import.meta.url).cache)
      .map((path) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(path)?.[1])
      .filter((name) => name !== undefined);
    process.stdout.write(JSON.stringify({ output, loaded: [...new Set(loaded)] }));
  `;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: root });
  return JSON.parse(stdout) as { output: string; loaded: string[] };
}

beforeAll(async () => {
  await buildIfStale();
}, 300_000);

describe('the CLI loads only what a command needs', () => {
  it.each([[['--version']], [['help']], [['intents', '--help']]])(
    '`payorch %s` loads no server module (pg, Fastify, ioredis)',
    async (args) => {
      const { output, loaded } = await packagesLoadedBy(args);
      expect(output.length).toBeGreaterThan(0);
      for (const heavy of ['pg', 'fastify', 'ioredis', 'pino', 'prom-client']) expect(loaded).not.toContain(heavy);
    },
  );

  it('`payorch help` lists the dead-webhook commands', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'bin/payorch.js'), 'help'], { cwd: root });
    expect(stdout).toContain('payorch admin webhooks dead list');
    expect(stdout).toContain('payorch admin webhooks dead redeliver CURSOR');
  });
});

describe('`npm start` builds only when a source changed', () => {
  it('with nothing changed, its build step compiles nothing and the build stays as it was', async () => {
    const before = (await stat(built)).mtimeMs;
    const { stdout, stderr } = await run('npm', ['run', 'prestart', '--silent'], { cwd: root });
    expect(`${stdout}${stderr}`).not.toContain('tsc');
    expect((await stat(built)).mtimeMs).toBe(before);
  });
});
