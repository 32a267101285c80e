import { beforeAll, describe, expect, it } from 'vitest';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { buildIfStale, freePort, spawnService } from '../support/service-process.js';
import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * docs/rules.md R66 for the process itself: `serve` started while the database does not answer
 * waits for it (JSON lines, backoff, at most STARTUP_DB_WAIT_S) instead of exiting at once, and a
 * SIGTERM at any moment after start (right after "Server listening", while the workers are still
 * starting) shuts it down gracefully with exit 0.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;

beforeAll(buildIfStale, 180_000);

function serveUntilExit(env: NodeJS.ProcessEnv): Promise<{ code: number | null; lines: string[]; elapsedMs: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      ['bin/payorch.js', 'serve'],
      { cwd: root, env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env } },
      (_error, out, err) => resolve({ code: child.exitCode, lines: `${out}${err}`.trim().split('\n'), elapsedMs: Date.now() - started }),
    );
  });
}

describe('serve started while the database does not answer', () => {
  it('waits STARTUP_DB_WAIT_S with JSON lines and backoff, then exits 1 naming the setting', async () => {
    const port = await freePort();
    const { code, lines, elapsedMs } = await serveUntilExit({
      DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/none`,
      STARTUP_DB_WAIT_S: '2',
    });
    expect(code).toBe(1);
    expect(elapsedMs).toBeGreaterThanOrEqual(2_000);
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const waits = parsed.filter((line) => line.event === 'database_wait');
    expect(waits.length).toBeGreaterThanOrEqual(2);
    expect(Number(waits[1]?.retryInMs)).toBeGreaterThan(Number(waits[0]?.retryInMs));
    expect(parsed.at(-1)).toMatchObject({ event: 'start_failed', msg: expect.stringContaining('STARTUP_DB_WAIT_S=2') });
  }, 60_000);

  it('SIGTERM during the wait ends it at once with exit 0', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ['bin/payorch.js', 'serve'], {
      cwd: root,
      env: {
        ...process.env,
        PORT: '0',
        LOG_LEVEL: 'info',
        DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/none`,
        STARTUP_DB_WAIT_S: '60',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve) =>
      child.stdout?.on('data', (chunk: Buffer) => chunk.toString().includes('database_wait') && resolve()),
    );
    const signalledAt = Date.now();
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(5_000);
  }, 60_000);

  it.runIf(pgUrl !== undefined)(
    'starts once the database answers',
    async () => {
      const target = new URL(pgUrl ?? '');
      const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
      proxy.cut('reset');
      const url = new URL(pgUrl ?? '');
      url.host = `127.0.0.1:${proxy.port}`;
      const child = spawn(process.execPath, ['bin/payorch.js', 'serve'], {
        cwd: root,
        env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: url.toString(), STARTUP_DB_WAIT_S: '60', PAYORCH_ROLE: 'api' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      let output = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      const seen = (text: string) =>
        new Promise<void>((resolve) => {
          const look = () => output.includes(text) && resolve();
          child.stdout?.on('data', look);
          look();
        });
      try {
        await seen('database_wait');
        proxy.restore();
        await seen('Server listening');
        const address = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
        expect((await fetch(`${address}/readyz`)).status).toBe(200);
      } finally {
        child.kill('SIGTERM');
        expect(await exited).toBe(0);
        await proxy.close();
      }
    },
    90_000,
  );
});

describe('SIGTERM right after "Server listening"', () => {
  it.each([1, 2, 3])(
    'shuts down gracefully, exit 0 (start %i)',
    async () => {
      const service = await spawnService({ DATABASE_URL: 'memory://' }, 90_000);
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
      expect(service.logs.some((line) => line.includes('shutting down'))).toBe(true);
    },
    120_000,
  );
});
