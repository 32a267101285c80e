import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIfStale, type ServiceProcess, spawnService } from '../support/service-process.js';

/**
 * What the container image does, without Docker: the package as `npm pack` makes it, installed
 * with production dependencies only (`--omit=dev`, as the Dockerfile's runtime stage), starts
 * `payorch serve` and answers, also with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT, a local OTLP
 * receiver). A runtime import of a dev dependency, a file the package does not ship, or an
 * OpenTelemetry set that resolves differently from the lockfile (docs/OPERATIONS.md, Dependency
 * versions) fails here.
 */

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const STARTUP_MS_MAX = 60_000;

let dir: string;
let service: ServiceProcess | undefined;
let traced: ServiceProcess | undefined;
let receiver: Server | undefined;

beforeAll(async () => {
  await buildIfStale();
  dir = await mkdtemp(join(tmpdir(), 'payorch-packed-'));
  // dist/ is built: the prepack builds are skipped. payorch and the workspace package it depends
  // on (@payorch/client) are packed and installed together, as they are published.
  await run(npm, ['pack', '--ignore-scripts', '--workspaces', '--include-workspace-root', '--pack-destination', dir], { cwd: root });
  const tarballs = (await readdir(dir)).filter((name) => name.endsWith('.tgz')).map((name) => join(dir, name));
  expect(tarballs).toHaveLength(2);
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'packed-install-check', private: true }));
  // --prefer-offline: the packages are in npm's cache from this checkout's own install.
  await run(npm, ['install', ...tarballs, '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir });
}, 300_000);

afterAll(async () => {
  for (const running of [service, traced]) {
    running?.child.kill('SIGTERM');
    await running?.exited;
  }
  receiver?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the packed package installed with --omit=dev', () => {
  it('has no dev dependency installed, and `payorch serve` starts and answers', async () => {
    const installed = await readdir(join(dir, 'node_modules'));
    for (const dev of ['typescript', 'vitest', '@biomejs', 'fast-check']) expect(installed).not.toContain(dev);
    service = await spawnService(
      { DATABASE_URL: 'memory://', REDIS_URL: '' },
      STARTUP_MS_MAX,
      join(dir, 'node_modules/payorch/bin/payorch.js'),
    );
    // The Dockerfile's HEALTHCHECK asks /livez.
    const live = await fetch(`${service.url}/livez`);
    expect(live.status).toBe(200);
    expect(((await live.json()) as { status: string }).status).toBe('ok');
  });

  it('resolves the OpenTelemetry set at the lockfile versions, and `serve` with OTEL_EXPORTER_OTLP_ENDPOINT starts and exports traces', async () => {
    const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
    const otelPackages = Object.keys(lock.packages).filter((path) => /^node_modules\/@opentelemetry\/[^/]+$/.test(path));
    expect(otelPackages.length).toBeGreaterThan(5);
    for (const path of otelPackages) {
      const installed = JSON.parse(await readFile(join(dir, path, 'package.json'), 'utf8').catch(() => '{}')) as { version?: string };
      const expected = lock.packages[path]?.version;
      // A dev-only package (none today) would be absent from the --omit=dev install.
      if (installed.version !== undefined) expect(`${path}@${installed.version}`).toBe(`${path}@${expected}`);
    }
    const exports: string[] = [];
    receiver = createServer((request, response) => {
      exports.push(`${request.method} ${request.url}`);
      request.resume();
      request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    });
    await new Promise<void>((resolve) => receiver?.listen(0, '127.0.0.1', resolve));
    const { port } = receiver.address() as AddressInfo;
    traced = await spawnService(
      {
        DATABASE_URL: 'memory://',
        REDIS_URL: '',
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      STARTUP_MS_MAX,
      join(dir, 'node_modules/payorch/bin/payorch.js'),
    );
    // A traced route (probes are not traced): a read without the admin token is refused, and its span is exported.
    const refused = await fetch(`${traced.url}/admin/webhooks/dead`);
    expect(refused.status).toBe(401);
    const deadline = Date.now() + 10_000;
    while (!exports.includes('POST /v1/traces') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(exports).toContain('POST /v1/traces');
    expect(traced.logs.join('\n')).not.toMatch(/SyntaxError|not found|Error \[ERR_/);
  });
});
