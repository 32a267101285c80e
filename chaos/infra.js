// The chaos run's own PostgreSQL, Redis and NATS: started in a temporary directory on free
// loopback ports, so that stopping, killing and taking them down for half a minute never touches
// a shared server (CI's tests run on those). PostgreSQL refuses to run as root: as root, its
// commands run as the `postgres` user.

import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, readFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Debian's PostgreSQL 15, where CI has it; CHAOS_PG_BIN for another install. */
const PG_BIN = process.env.CHAOS_PG_BIN ?? '/usr/lib/postgresql/15/bin';
/** pg_ctl -w waits this long for a start or a stop. */
const PG_CTL_WAIT_S = 60;
/** Debian installs nats-server in /usr/sbin, which a user's PATH may lack. */
const NATS_SERVER = process.env.CHAOS_NATS_BIN ?? (existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server');
/** After a SIGKILL of the postmaster its backends hold the shared memory until they notice: a start is retried this long. */
const PG_RESTART_MS_MAX = 60_000;
const REDIS_WAIT_MS_MAX = 10_000;
const POLL_MS = 100;

/**
 * The port named by an environment variable, else a free one: CI and people sharing a machine
 * pin them (CHAOS_PG_PORT, CHAOS_REDIS_PORT, CHAOS_NATS_PORT) so that they are known not to
 * clash with the shared servers or with each other's runs.
 * @param {string} variable
 * @returns {Promise<number>}
 */
async function portOf(variable) {
  const pinned = process.env[variable];
  if (pinned === undefined || pinned === '') return freePort();
  const port = Number(pinned);
  if (!Number.isInteger(port) || port <= 0 || port > 65_535) throw new Error(`${variable}=${pinned} is not a port`);
  // The run stops and kills what answers on its ports: never someone else's server.
  if (await connects(port)) throw new Error(`${variable}=${port}: something already listens there`);
  return port;
}

/** @returns {Promise<number>} */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      // Listening on a TCP port: the address is always an AddressInfo.
      const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

const asRoot = process.getuid?.() === 0;

/**
 * @param {string} file
 * @param {readonly string[]} argv
 */
async function runAsPostgres(file, argv) {
  const command = asRoot ? ['runuser', ['-u', 'postgres', '--', file, ...argv]] : [file, argv];
  // The tuple above is [string, string[]] by construction.
  const [bin, binArgs] = /** @type {[string, string[]]} */ (command);
  return run(bin, binArgs, { maxBuffer: 16 * 1024 * 1024 });
}

/**
 * A PostgreSQL cluster of its own: initdb, start, and the three ways of ending it.
 * @param {string} dir an empty directory of the run's
 */
export async function privatePostgres(dir) {
  const home = join(dir, 'pg');
  const data = join(home, 'data');
  const log = join(home, 'server.log');
  const port = await portOf('CHAOS_PG_PORT');
  await mkdir(home, { recursive: true });
  if (asRoot) {
    // The run's directory is root's (mkdtemp: 0700); the postgres user must reach its own part.
    await chmod(dir, 0o755);
    await chown(home, ...(await postgresIds()));
  }
  await runAsPostgres(join(PG_BIN, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
  const start = () =>
    runAsPostgres(join(PG_BIN, 'pg_ctl'), [
      '-D',
      data,
      '-o',
      `-p ${port} -k ${home} -c listen_addresses=127.0.0.1 -c fsync=on`,
      '-l',
      log,
      '-w',
      '-t',
      String(PG_CTL_WAIT_S),
      'start',
    ]);
  await start();
  return {
    port,
    log,
    /** @param {string} database */
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    /** Starts again, retrying while a killed postmaster's backends still hold its shared memory. */
    async start() {
      const deadline = Date.now() + PG_RESTART_MS_MAX;
      for (;;) {
        try {
          await start();
          return;
        } catch (error) {
          if (Date.now() > deadline) throw error;
          await sleep(200);
        }
      }
    },
    /** @param {'fast' | 'immediate'} mode */
    stop: (mode) => runAsPostgres(join(PG_BIN, 'pg_ctl'), ['-D', data, '-m', mode, '-w', '-t', String(PG_CTL_WAIT_S), 'stop']),
    /** SIGKILL of the postmaster, as the kernel's OOM killer would: no shutdown checkpoint, backends orphaned. */
    async kill() {
      const pid = Number((await readFile(join(data, 'postmaster.pid'), 'utf8')).split('\n')[0]);
      process.kill(pid, 'SIGKILL');
      while (alive(pid)) await sleep(POLL_MS);
    },
    /** At the end of the run: nothing of it is kept running. */
    async close() {
      await runAsPostgres(join(PG_BIN, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
    },
  };
}

/** @returns {Promise<[number, number]>} */
async function postgresIds() {
  const [{ stdout: uid }, { stdout: gid }] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
  return [Number(uid.trim()), Number(gid.trim())];
}

/** @param {number} pid */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A Redis of its own, without persistence: a restart empties it, as a restart of a cache would.
 * @param {string} dir
 */
export async function privateRedis(dir) {
  const home = join(dir, 'redis');
  await mkdir(home, { recursive: true });
  const port = await portOf('CHAOS_REDIS_PORT');
  const argv = [
    '--daemonize',
    'yes',
    '--bind',
    '127.0.0.1',
    '--port',
    String(port),
    '--save',
    '',
    '--appendonly',
    'no',
    '--maxmemory-policy',
    'noeviction',
    '--dir',
    home,
    '--logfile',
    join(home, 'redis.log'),
    '--pidfile',
    join(home, 'redis.pid'),
  ];
  const ping = async () => {
    try {
      return (await run('redis-cli', ['-p', String(port), 'ping'])).stdout.trim() === 'PONG';
    } catch {
      return false;
    }
  };
  const start = async () => {
    await run('redis-server', argv);
    const deadline = Date.now() + REDIS_WAIT_MS_MAX;
    while (!(await ping())) {
      if (Date.now() > deadline) throw new Error(`Redis on port ${port} did not start (log: ${join(home, 'redis.log')})`);
      await sleep(POLL_MS);
    }
  };
  const stop = async () => {
    // shutdown closes the connection it came on; redis-cli reports that as an error.
    await run('redis-cli', ['-p', String(port), 'shutdown', 'nosave']).catch(() => {});
    const deadline = Date.now() + REDIS_WAIT_MS_MAX;
    while (await ping()) {
      if (Date.now() > deadline) throw new Error(`Redis on port ${port} did not stop`);
      await sleep(POLL_MS);
    }
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, start, stop, close: stop };
}

/**
 * A NATS server with JetStream of its own, a child of this process.
 * @param {string} dir
 */
export async function privateNats(dir) {
  const home = join(dir, 'nats');
  await mkdir(home, { recursive: true });
  const port = await portOf('CHAOS_NATS_PORT');
  const child = spawn(NATS_SERVER, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', home, '-l', join(home, 'nats.log')], {
    stdio: 'ignore',
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const deadline = Date.now() + REDIS_WAIT_MS_MAX;
  while (!(await connects(port))) {
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`NATS on port ${port} did not start (log: ${join(home, 'nats.log')})`);
    await sleep(POLL_MS);
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    async close() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * @param {number} port
 * @returns {Promise<boolean>}
 */
function connects(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
