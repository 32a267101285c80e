import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, stopRedis } from '../support/private-redis.js';
import { buildIfStale, freePort, spawnService } from '../support/service-process.js';

/**
 * Replay records must outlive their window (docs/SECURITY.md §4): a Redis that evicts when full
 * could drop one early, so the start says so by name.
 */

const withRedis = process.env.REDIS_URL !== undefined;

describe.runIf(withRedis)('the start checks that Redis never evicts replay records', () => {
  const redises: ChildProcess[] = [];
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'payorch-eviction-'));
    await buildIfStale();
  }, 180_000);
  afterAll(async () => {
    await Promise.all(redises.map(stopRedis));
    await rm(dataDir, { recursive: true, force: true });
  });

  async function startLogs(policy: string): Promise<string[]> {
    const port = await freePort();
    redises.push(await startRedis(port, ['--maxmemory-policy', policy]));
    // The embedded database: the check is about Redis alone.
    const service = await spawnService({ REDIS_URL: `redis://127.0.0.1:${port}`, DATABASE_URL: '', DATA_DIR: dataDir }, 120_000);
    // The start does not wait for Redis's answer; give it a moment to arrive.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    service.child.kill('SIGTERM');
    await service.exited;
    return service.logs;
  }

  it('warns by name when the policy evicts', async () => {
    const logs = await startLogs('allkeys-lru');
    const warning = logs.find((line) => line.includes('maxmemory-policy'));
    expect(warning).toBeDefined();
    expect(JSON.parse(warning ?? '{}')).toMatchObject({ level: 40, maxmemoryPolicy: 'allkeys-lru' });
  }, 180_000);

  it('says nothing with noeviction', async () => {
    const logs = await startLogs('noeviction');
    expect(logs.some((line) => line.includes('Server listening'))).toBe(true);
    expect(logs.some((line) => line.includes('maxmemory-policy'))).toBe(false);
  }, 180_000);
});
