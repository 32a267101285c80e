import { execFile } from 'node:child_process';
import { chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keepsSessions } from '../../src/adapters/pool-mode-probe.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { buildIfStale, freePort, spawnService } from '../support/service-process.js';

/**
 * docs/rules.md R68: behind PgBouncer in transaction pooling without DATABASE_POOL_MODE=transaction
 * the start refuses, naming the setting, instead of answering 500s one request at a time. A
 * private PgBouncer (Debian's, as .ci/run installs it) in front of the suite's PostgreSQL.
 */

const run = promisify(execFile);
const onPostgres = (process.env.DATABASE_URL ?? '').startsWith('postgres');
const PGBOUNCER = '/usr/sbin/pgbouncer';

let dir: string;
let bouncerUrl: string;
let scoped: TestSchema;

describe.runIf(onPostgres && testPoolMode === 'session')('the start behind PgBouncer in transaction pooling', () => {
  beforeAll(async () => {
    await buildIfStale();
    scoped = await createTestSchema(process.env.DATABASE_URL ?? '', 'pool_probe');
    const server = new URL(scoped.url);
    const port = await freePort();
    dir = await mkdtemp(join(tmpdir(), 'payorch-pgbouncer-'));
    await writeFile(
      join(dir, 'pgbouncer.ini'),
      `[databases]
* = host=${server.hostname} port=${server.port || 5432}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = trust
auth_file = ${dir}/userlist.txt
pool_mode = transaction
logfile = ${dir}/pgbouncer.log
pidfile = ${dir}/pgbouncer.pid
`,
    );
    await writeFile(join(dir, 'userlist.txt'), `"${decodeURIComponent(server.username)}" ""\n`);
    // PgBouncer refuses to run as root: it then runs as the postgres user, as in .ci/run.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      const { stdout } = await run('id', ['-u', 'postgres']);
      const uid = Number(stdout.trim());
      for (const file of ['', 'pgbouncer.ini', 'userlist.txt']) await chown(join(dir, file), uid, uid);
    }
    await run(PGBOUNCER, [...(asRoot ? ['-u', 'postgres'] : []), '-d', join(dir, 'pgbouncer.ini')]);
    server.port = String(port);
    bouncerUrl = server.toString();
  }, 120_000);

  afterAll(async () => {
    const pid = Number(await readFile(join(dir, 'pgbouncer.pid'), 'utf8').catch(() => '0'));
    if (pid > 0) process.kill(pid, 'SIGTERM');
    await rm(dir, { recursive: true, force: true });
    await scoped?.drop();
  });

  it('the probe tells PostgreSQL (sessions kept) from transaction pooling (not kept)', async () => {
    expect(await keepsSessions(scoped.url)).toBe(true);
    expect(await keepsSessions(bouncerUrl)).toBe(false);
  });

  it('`payorch serve` without DATABASE_POOL_MODE=transaction refuses to start and names the setting', async () => {
    const started = spawnService({ DATABASE_URL: bouncerUrl, REDIS_URL: '' }, 30_000);
    const failure = await started.then(
      () => 'started',
      (error: Error) => error.message,
    );
    expect(failure).toMatch(/exited \(1\) before listening/);
    expect(failure).toContain('set DATABASE_POOL_MODE=transaction');
  }, 60_000);

  it('with DATABASE_POOL_MODE=transaction it starts', async () => {
    const service = await spawnService({ DATABASE_URL: bouncerUrl, DATABASE_POOL_MODE: 'transaction', REDIS_URL: '' }, 60_000);
    try {
      expect((await fetch(`${service.url}/readyz`)).status).toBe(200);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }, 90_000);
});
