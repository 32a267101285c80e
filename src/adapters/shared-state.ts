import { Redis } from 'ioredis';

/**
 * State that every instance of the API must agree on: which signed requests were already seen
 * (replay caches) and how much of a rate limit is spent. In Redis when REDIS_URL is set, so a
 * request replayed against a second instance is caught there too; in this process otherwise.
 */
export interface SharedState {
  readonly kind: 'memory' | 'redis';
  /** Every key is stored under this prefix, so several deployments (or test files) can share one Redis. */
  readonly prefix: string;
  /** The Redis connection, for components that need their own atomic script; null in memory. */
  readonly redis: Redis | null;
  /** True the first time `key` is claimed within `ttlMs`, false while an earlier claim lives (on any instance). */
  claimOnce(key: string, ttlMs: number, options?: ClaimOptions): Promise<boolean>;
  close(): Promise<void>;
}

export interface ClaimOptions {
  /**
   * Recorded in the database too while Redis answers, not only during an outage: a claim whose
   * replay must stay refused when Redis stops answering, which the database can refuse only if it
   * holds the claim (docs/rules.md R64). Meaningful with the database fallback only.
   */
  readonly survivesRedisOutage?: boolean;
}

/**
 * Live claims kept in memory at most. Past it a new claim is refused (the request is answered 503)
 * and no live claim is ever dropped: forgetting one early would let its request be replayed
 * within its window (docs/rules.md R61). At the 120 s replay window that is over 1,600 admitted
 * signed requests a second on one instance, each past its rate limit; more needs Redis.
 */
export const MEMORY_CLAIMS_MAX = 200_000;

/** The store holds as many live claims as it may: the claim is refused, none is dropped. */
export class SharedStateFullError extends Error {
  override readonly name = 'SharedStateFullError';
}

export function createMemorySharedState(prefix = '', claimsMax = MEMORY_CLAIMS_MAX): SharedState {
  // Insertion order is expiry order for one TTL; with several TTLs an early expiry may wait behind a later one, which only keeps it longer.
  const claims = new Map<string, number>();
  const forgetExpired = (nowMs: number) => {
    for (const [key, expiresAtMs] of claims) {
      if (expiresAtMs > nowMs) break;
      claims.delete(key);
    }
  };
  return {
    kind: 'memory',
    prefix,
    redis: null,
    async claimOnce(key, ttlMs) {
      const nowMs = Date.now();
      forgetExpired(nowMs);
      const existing = claims.get(prefix + key);
      if (existing !== undefined && existing > nowMs) return false;
      if (claims.size >= claimsMax)
        throw new SharedStateFullError(`${claimsMax} replay records are live; none is dropped before its window ends`);
      claims.set(prefix + key, nowMs + ttlMs);
      return true;
    },
    async close() {
      claims.clear();
    },
  };
}

export function createRedisSharedState(url: string, prefix = 'payorch:'): SharedState {
  const redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true });
  // Connection errors are retried by ioredis; without a listener they would crash the process.
  redis.on('error', () => {});
  return {
    kind: 'redis',
    prefix,
    redis,
    async claimOnce(key, ttlMs) {
      // SET NX is atomic across instances: exactly one of two concurrent claims gets OK.
      const answer = await redis.set(prefix + key, '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX');
      return answer === 'OK';
    },
    async close() {
      redis.disconnect();
    },
  };
}

/**
 * Redis's `maxmemory-policy`, or null when Redis will not say (managed services often refuse
 * CONFIG). Replay claims must outlive their window (docs/SECURITY.md §4), which only `noeviction`
 * promises once Redis is full.
 */
export async function evictionPolicyOf(redis: Redis): Promise<string | null> {
  const answer = (await redis.config('GET', 'maxmemory-policy').catch(() => [])) as unknown[];
  return typeof answer[1] === 'string' ? answer[1] : null;
}

export const createSharedState = (redisUrl: string | undefined, prefix?: string): SharedState =>
  redisUrl === undefined ? createMemorySharedState(prefix) : createRedisSharedState(redisUrl, prefix);
