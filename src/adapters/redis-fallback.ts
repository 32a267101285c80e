import type { Logger } from './logger.js';
import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import type { ClaimOptions, SharedState } from './shared-state.js';
import type { Sql } from './sql.js';
import { createMemoryTokenBuckets, type TokenBuckets } from './token-buckets.js';

/** Redis is never on the money path (docs/rules.md R64): no request waits on it longer than this. */
export const REDIS_REQUEST_BOUND_MS = 100;

class RedisTooSlow extends Error {
  override readonly name = 'RedisTooSlow';
}

/**
 * `call`'s answer, or RedisTooSlow once the bound has passed. The command itself is not cancelled:
 * a claim that lands in Redis late only records the key there too, the stricter side.
 *
 * The bound is Redis's, not this process's: when the timer fires, the replies that arrived while
 * the event loop was busy (or the process was off the CPU) are still unread, and the loop runs
 * timers before it reads sockets. So the verdict waits one turn for them (setImmediate runs after
 * the sockets are read). Without that turn, a flood that made the loop late by 100 ms made Redis
 * look down, and every request went to the database for the next replay window
 * (docs/SECURITY.md §10a).
 */
async function bounded<T>(call: Promise<T>): Promise<T> {
  const timer = new AbortController();
  call.catch(() => {});
  try {
    return await Promise.race([
      call,
      sleep(REDIS_REQUEST_BOUND_MS, undefined, { signal: timer.signal, ref: false })
        .then(() => setImmediate(undefined, { signal: timer.signal, ref: false }))
        .then(() => {
          throw new RedisTooSlow(`Redis did not answer within ${REDIS_REQUEST_BOUND_MS} ms`);
        }),
    ]);
  } finally {
    timer.abort();
  }
}

/**
 * After a failed call Redis is left alone this long: requests go to the fallbacks at once instead
 * of each spending the bound first. Then one request tries Redis again.
 */
export const REDIS_RETRY_AFTER_MS = 1_000;

/**
 * Whether Redis answers, as the request path last found it: one log line when it stops and one
 * when it answers again, the state for /readyz and the `payorch_redis_up` gauge.
 */
export class RedisHealth {
  private downSinceMs: number | null = null;
  private retryAtMs = 0;
  private fallbacks = 0;

  constructor(private readonly log: Logger) {}

  get state(): 'ok' | 'unreachable' {
    return this.downSinceMs === null ? 'ok' : 'unreachable';
  }

  /** False while failed calls say Redis is not worth asking yet. */
  worthAsking(): boolean {
    return this.downSinceMs === null || performance.now() >= this.retryAtMs;
  }

  failed(error: unknown): void {
    this.fallbacks += 1;
    this.retryAtMs = performance.now() + REDIS_RETRY_AFTER_MS;
    if (this.downSinceMs !== null) return;
    this.downSinceMs = Date.now();
    this.log.error(
      { event: 'redis_unreachable', cause: error instanceof Error ? error.message : String(error) },
      'Redis does not answer: replay records go to the database, rate limits to this process, live messages are dropped',
    );
  }

  /** Counts a request served by a fallback without asking Redis. */
  skipped(): void {
    this.fallbacks += 1;
  }

  succeeded(): void {
    if (this.downSinceMs === null) return;
    this.log.info(
      { event: 'redis_answers_again', durationMs: Date.now() - this.downSinceMs, fallbacks: this.fallbacks },
      'Redis answers again',
    );
    this.downSinceMs = null;
    this.fallbacks = 0;
  }
}

/** Replay and nonce records in the database: the same once-only guarantee across instances (sql/replay/01-claim.sql). */
export async function claimInDatabase(sql: Sql, key: string, ttlMs: number): Promise<boolean> {
  const { rows } = await sql.query<{ claimed: boolean }>('SELECT replay_claim($1, $2) AS claimed', [key, Math.max(1, Math.ceil(ttlMs))]);
  return rows[0]?.claimed === true;
}

/**
 * Claims in Redis, and in the database when Redis does not answer within its bound. Claims made in
 * the database stay there for their time to live, so for that long after Redis is back every claim
 * is made in both and granted only when both grant it: a nonce used during the outage cannot be
 * replayed once Redis returns. A claim that `survivesRedisOutage` is made in both always, so an
 * outage does not forget the ones made before it either.
 */
export function withDatabaseFallback(redisState: SharedState, sql: Sql, health: RedisHealth): SharedState {
  let databaseClaimsLiveUntilMs = 0;
  const claimInDatabaseToo = async (key: string, ttlMs: number) => {
    databaseClaimsLiveUntilMs = Math.max(databaseClaimsLiveUntilMs, Date.now() + ttlMs);
    return claimInDatabase(sql, redisState.prefix + key, ttlMs);
  };
  return {
    ...redisState,
    async claimOnce(key: string, ttlMs: number, options?: ClaimOptions) {
      if (!health.worthAsking()) {
        health.skipped();
        return claimInDatabaseToo(key, ttlMs);
      }
      let inRedis: boolean;
      try {
        inRedis = await bounded(redisState.claimOnce(key, ttlMs));
      } catch (error) {
        health.failed(error);
        return claimInDatabaseToo(key, ttlMs);
      }
      health.succeeded();
      if (options?.survivesRedisOutage !== true && Date.now() >= databaseClaimsLiveUntilMs) return inRedis;
      // Both, even when Redis refused: the database's record must exist for the outage's instances.
      const inDatabase = await claimInDatabase(sql, redisState.prefix + key, ttlMs);
      return inRedis && inDatabase;
    },
  };
}

/** Buckets in Redis, and in this process while Redis does not answer: a limit per process beats no limit, and stopped payments. */
export function withMemoryFallback(redisBuckets: TokenBuckets, health: RedisHealth): TokenBuckets {
  const local = createMemoryTokenBuckets();
  return {
    async take(key, rule, cost) {
      if (!health.worthAsking()) {
        health.skipped();
        return local.take(key, rule, cost);
      }
      try {
        const answer = await bounded(redisBuckets.take(key, rule, cost));
        health.succeeded();
        return answer;
      } catch (error) {
        health.failed(error);
        return local.take(key, rule, cost);
      }
    },
  };
}
