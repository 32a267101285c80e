import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemorySharedState, createRedisSharedState, MEMORY_CLAIMS_MAX, type SharedState } from '../../src/adapters/shared-state.js';
import { messageSignedHeaders } from '../../src/domain/auth/message-signing.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { claimNonce } from '../../src/http/plugins/replay-guard.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { startRedis, stopRedis } from '../support/private-redis.js';
import { freePort } from '../support/service-process.js';

/**
 * docs/rules.md R61: 300,000 unique nonces from one key within the replay window do not make a
 * captured admin write pass (docs/SECURITY.md §10a). Over a real listener: the write is captured,
 * the key floods unique nonces, and the write is sent again. On a shared two-core machine the
 * service answers a few hundred signed requests a second, so 300,000 over HTTP would take most of
 * an hour; the claim is about what the store keeps, so most of the records are taken by the replay
 * guard's own claimNonce, under the keys an HTTP request takes (one of the HTTP flood's nonces, and
 * one of the filled ones, sent again over HTTP are both refused as replayed).
 */

const FLOOD_NONCES = 300_000;
const OVER_HTTP = 300;
/** Claims in flight at once while filling: Redis answers them in pipelined batches. */
const FILL_CONCURRENCY = 2_000;
const FLOOD_PATH = '/events?limit=0';
/** The captured write is signed this far ahead, so its timestamp stays acceptable through the fill (the window is ±60 s). */
const CAPTURE_AHEAD_S = 55;

interface Flooded {
  t: TestApp;
  url: string;
}

async function startListening(shared: SharedState): Promise<Flooded> {
  const t = await startTestApp({ shared });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return { t, url: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}` };
}

function captureAdminWrite({ t, url }: Flooded): () => Promise<{ status: number; message: string | undefined }> {
  const body = JSON.stringify({ level: 'info' });
  const nowS = Math.floor(Date.now() / 1000) + CAPTURE_AHEAD_S;
  const headers = {
    ...signedHeaders('admin-tool', t.secrets.get('admin-tool')?.[0] ?? '', 'PUT', '/admin/log-level', body, { nowS }),
    'content-type': 'application/json',
  };
  return async () => {
    const res = await fetch(`${url}/admin/log-level`, { method: 'PUT', headers, body });
    return { status: res.status, message: ((await res.json()) as { message?: string }).message };
  };
}

/** One unique-nonce request of the flooding key, and its nonce. */
async function floodRequest(
  { t, url }: Flooded,
  nonce = randomBytes(16).toString('base64url'),
): Promise<{ status: number; message: string | undefined; nonce: string }> {
  const headers = messageSignedHeaders('mobile-gateway', t.secrets.get('mobile-gateway')?.[0] ?? '', 'GET', FLOOD_PATH, '', { nonce });
  const res = await fetch(`${url}${FLOOD_PATH}`, { headers });
  return { status: res.status, message: ((await res.json()) as { message?: string }).message, nonce };
}

/** The rest of the flood, through the replay guard: counts of records taken and refused (store full). */
async function fill(shared: SharedState, count: number): Promise<{ taken: number; refusedFull: number; lastNonce: string }> {
  let taken = 0;
  let refusedFull = 0;
  let lastNonce = '';
  for (let done = 0; done < count; done += FILL_CONCURRENCY) {
    const nonces = Array.from({ length: Math.min(FILL_CONCURRENCY, count - done) }, () => randomBytes(16).toString('base64url'));
    const answers = await Promise.allSettled(nonces.map((nonce) => claimNonce(shared, 'mobile-gateway', nonce)));
    answers.forEach((answer, i) => {
      if (answer.status === 'fulfilled') {
        taken += 1;
        lastNonce = nonces[i] ?? lastNonce;
      } else refusedFull += 1;
    });
  }
  return { taken, refusedFull, lastNonce };
}

async function httpFlood(flooded: Flooded): Promise<{ statuses: Record<number, number>; firstNonce: string }> {
  const statuses: Record<number, number> = {};
  let firstNonce = '';
  for (let i = 0; i < OVER_HTTP; i += 1) {
    const answer = await floodRequest(flooded);
    statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
    if (i === 0) firstNonce = answer.nonce;
  }
  return { statuses, firstNonce };
}

describe('300,000 unique nonces from one key, records in Redis (noeviction)', () => {
  let redis: ChildProcess;
  let flooded: Flooded;

  beforeAll(async () => {
    const port = await freePort();
    redis = await startRedis(port, ['--maxmemory-policy', 'noeviction']);
    flooded = await startListening(createRedisSharedState(`redis://127.0.0.1:${port}`, `payorch-flood-${randomBytes(4).toString('hex')}:`));
  }, 60_000);

  afterAll(async () => {
    await flooded?.t.shared.close();
    await flooded?.t.close();
    if (redis !== undefined) await stopRedis(redis);
  });

  it('keeps every record: the captured admin write and the flood nonces stay refused as replays', async () => {
    const { t } = flooded;
    const replayAdminWrite = captureAdminWrite(flooded);
    expect(await replayAdminWrite()).toEqual({ status: 200, message: undefined });

    const http = await httpFlood(flooded);
    // Refused by the route's schema (limit 0) after the nonce record was taken.
    expect(http.statuses).toEqual({ 422: OVER_HTTP });
    const filled = await fill(t.shared, FLOOD_NONCES - OVER_HTTP);
    expect(filled).toMatchObject({ taken: FLOOD_NONCES - OVER_HTTP, refusedFull: 0 });

    // A request that found Redis past its bound (a loaded machine) left its record in the database (docs/rules.md R64).
    const redisClient = t.shared.redis!;
    const inRedis = await redisClient.keys(`${t.shared.prefix}nonce:*`);
    const { rows } = await t.db.query<{ key: string }>('SELECT key FROM replay_claims WHERE key LIKE $1', [`${t.shared.prefix}nonce:%`]);
    expect(new Set([...inRedis, ...rows.map((row) => row.key)]).size).toBe(FLOOD_NONCES);
    expect(/evicted_keys:0\r/.test(await redisClient.info('stats'))).toBe(true);

    expect(await replayAdminWrite()).toEqual({ status: 401, message: 'replayed request' });
    expect(await floodRequest(flooded, http.firstNonce)).toMatchObject({ status: 401, message: 'replayed nonce' });
    expect(await floodRequest(flooded, filled.lastNonce)).toMatchObject({ status: 401, message: 'replayed nonce' });
  }, 170_000);
});

describe('300,000 unique nonces from one key, records in the service (no Redis)', () => {
  let flooded: Flooded;

  beforeAll(async () => {
    flooded = await startListening(createMemorySharedState(`payorch-flood-${randomBytes(4).toString('hex')}:`));
  }, 60_000);

  afterAll(async () => {
    await flooded?.t.close();
    await flooded?.t.shared.close();
  });

  it(`refuses past ${MEMORY_CLAIMS_MAX} live records (503) and forgets none: the captured admin write stays refused`, async () => {
    const { t } = flooded;
    const replayAdminWrite = captureAdminWrite(flooded);
    expect(await replayAdminWrite()).toEqual({ status: 200, message: undefined });

    const http = await httpFlood(flooded);
    expect(http.statuses).toEqual({ 422: OVER_HTTP });
    const filled = await fill(t.shared, FLOOD_NONCES - OVER_HTTP);
    // The admin write holds one record, the HTTP flood OVER_HTTP: the store is full at MEMORY_CLAIMS_MAX.
    expect(filled.taken).toBe(MEMORY_CLAIMS_MAX - 1 - OVER_HTTP);
    expect(filled.refusedFull).toBe(FLOOD_NONCES - OVER_HTTP - filled.taken);

    expect(await floodRequest(flooded)).toMatchObject({ status: 503 });
    expect(await replayAdminWrite()).toEqual({ status: 401, message: 'replayed request' });
    expect(await floodRequest(flooded, http.firstNonce)).toMatchObject({ status: 401, message: 'replayed nonce' });
    expect(await floodRequest(flooded, filled.lastNonce)).toMatchObject({ status: 401, message: 'replayed nonce' });
  }, 170_000);
});
