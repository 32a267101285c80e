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
 * What an operator does with a release, without Docker: the tarball `npm run release:pack` makes,
 * installed alone in an empty directory with production dependencies only (`--omit=dev`, as the
 * Dockerfile's runtime stage), starts `payorch serve` and answers, also with tracing on
 * (OTEL_EXPORTER_OTLP_ENDPOINT, a local OTLP receiver). A runtime import of a dev dependency, a
 * file the package does not ship, a dependency that resolves to another version than CI's
 * `npm ci` installs from package-lock.json, or an engine warning from the install fails here
 * (docs/OPERATIONS.md, Dependency versions).
 */

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
// The tests that start `serve` may wait this long for it, and then have requests to make.
const STARTUP_MS_MAX = 60_000;

let dir: string;
let installOutput: string;
let service: ServiceProcess | undefined;
let traced: ServiceProcess | undefined;
let receiver: Server | undefined;

beforeAll(async () => {
  await buildIfStale();
  dir = await mkdtemp(join(tmpdir(), 'payorch-packed-'));
  // The release as `npm run release:pack` makes it; dist/ is built.
  await run(process.execPath, [join(root, 'scripts/pack-release.js'), dir], { cwd: root, maxBuffer: 64 * 1024 * 1024 });
  const tarballs = (await readdir(dir)).filter((name) => name.endsWith('.tgz'));
  expect(tarballs).toHaveLength(1);
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'packed-install-check', private: true }));
  // --prefer-offline: whatever the install fetches is in npm's cache from this checkout's own install.
  const install = await run(
    npm,
    ['install', join(dir, tarballs[0] as string), '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'],
    {
      cwd: dir,
    },
  );
  installOutput = `${install.stdout}${install.stderr}`;
}, 600_000);

afterAll(async () => {
  for (const running of [service, traced]) {
    running?.child.kill('SIGTERM');
    await running?.exited;
  }
  receiver?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the packed package installed with --omit=dev', () => {
  it('installs every production dependency at the version package-lock.json gives CI, with no engine warning', async () => {
    const locked = await lockedProductionPackages();
    const installed = await installedPackages(join(dir, 'node_modules'));
    // Named first, for a readable failure: those that once resolved newer (they want Node 22) and
    // the OpenTelemetry API that every instrumentation must share.
    for (const name of ['cookie', 'content-disposition', '@nats-io/nuid', '@opentelemetry/api']) {
      expect(versionsOf(installed, name), name).toEqual(versionsOf(locked, name));
    }
    expect(installed).toEqual(locked);
    // Every package came out of the tarball's bundle: one that npm resolved from its range
    // instead would be hoisted beside payorch.
    const topLevel = (await readdir(join(dir, 'node_modules'))).filter((name) => !name.startsWith('.'));
    expect(topLevel).toEqual(['payorch']);
    expect(installOutput).not.toMatch(/EBADENGINE/);
  });

  it(
    'has no dev dependency installed, and `payorch serve` starts and answers',
    async () => {
      const installed = await installedPackages(join(dir, 'node_modules'));
      for (const dev of ['typescript', 'vitest', '@biomejs/biome', 'fast-check']) expect(versionsOf(installed, dev), dev).toEqual([]);
      service = await spawnService(
        { DATABASE_URL: 'memory://', REDIS_URL: '' },
        STARTUP_MS_MAX,
        join(dir, 'node_modules/payorch/bin/payorch.js'),
      );
      // The Dockerfile's HEALTHCHECK asks /livez.
      const live = await fetch(`${service.url}/livez`);
      expect(live.status).toBe(200);
      expect(((await live.json()) as { status: string }).status).toBe('ok');
    },
    STARTUP_MS_MAX + 30_000,
  );

  it(
    '`serve` with OTEL_EXPORTER_OTLP_ENDPOINT starts and exports traces',
    async () => {
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
    },
    STARTUP_MS_MAX + 30_000,
  );
});

/** Distinct `name@version` of the packages `npm ci --omit=dev` installs from package-lock.json. */
async function lockedProductionPackages(): Promise<string[]> {
  const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; dev?: boolean; link?: boolean; resolved?: string }>;
  };
  const found = new Set<string>();
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (!path.startsWith('node_modules/') || entry.dev) continue;
    // A workspace package is a link to its folder, whose entry has the version.
    const version = entry.link ? lock.packages[entry.resolved ?? '']?.version : entry.version;
    found.add(`${packageNameAt(path)}@${version}`);
  }
  return [...found].sort();
}

/** Distinct `name@version` of every package under a node_modules folder, payorch itself left out. */
async function installedPackages(nodeModules: string): Promise<string[]> {
  const found = new Set<string>();
  const visit = async (folder: string): Promise<void> => {
    const names = await readdir(folder).catch(() => [] as string[]);
    for (const name of names) {
      if (name.startsWith('.')) continue;
      const packageDirs = name.startsWith('@')
        ? (await readdir(join(folder, name))).map((scoped) => join(folder, name, scoped))
        : [join(folder, name)];
      for (const packageDir of packageDirs) {
        const manifest = JSON.parse(await readFile(join(packageDir, 'package.json'), 'utf8')) as { name: string; version: string };
        if (manifest.name !== 'payorch') found.add(`${manifest.name}@${manifest.version}`);
        await visit(join(packageDir, 'node_modules'));
      }
    }
  };
  await visit(nodeModules);
  return [...found].sort();
}

function packageNameAt(lockPath: string): string {
  return lockPath.slice(lockPath.lastIndexOf('node_modules/') + 'node_modules/'.length);
}

function versionsOf(packages: string[], name: string): string[] {
  return packages.filter((entry) => entry.slice(0, entry.lastIndexOf('@')) === name);
}
