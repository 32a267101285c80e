import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIfStale, type ServiceProcess, spawnService } from '../support/service-process.js';

/**
 * What the container image does, without Docker: the package as `npm pack` makes it, installed
 * with production dependencies only (`--omit=dev`, as the Dockerfile's runtime stage), starts
 * `payorch serve` and answers. A runtime import of a dev dependency, or a file the package does
 * not ship, fails here.
 */

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const STARTUP_MS_MAX = 60_000;

let dir: string;
let service: ServiceProcess | undefined;

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
  service?.child.kill('SIGTERM');
  await service?.exited;
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
});
