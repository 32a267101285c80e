import type { Redis, Result } from 'ioredis';
import type { SharedState } from './shared-state.js';

export interface BucketRule {
  /** Tokens added per second. */
  readonly ratePerS: number;
  /** Capacity: how many requests may come at once after a quiet spell. */
  readonly burst: number;
}

export interface BucketAnswer {
  readonly allowed: boolean;
  /** Milliseconds until one token is there again; 0 when allowed. */
  readonly waitMs: number;
}

/**
 * Token buckets keyed by name (a service id, a source), in Redis when the state is shared so that
 * every instance draws from one bucket; in this process otherwise.
 */
export interface TokenBuckets {
  /** Takes `cost` tokens when there are that many; `cost` 0 only asks whether one is there. */
  take(key: string, rule: BucketRule, cost?: number): Promise<BucketAnswer>;
}

/** Past this many buckets in memory the least recently created is dropped (a full bucket again: the lenient side). */
export const MEMORY_BUCKETS_MAX = 100_000;

interface Bucket {
  tokens: number;
  atMs: number;
}

function refill(bucket: Bucket, rule: BucketRule, nowMs: number): void {
  bucket.tokens = Math.min(rule.burst, bucket.tokens + ((nowMs - bucket.atMs) * rule.ratePerS) / 1000);
  bucket.atMs = nowMs;
}

function answer(bucket: Bucket, rule: BucketRule, cost: number): BucketAnswer {
  const needed = Math.max(cost, 1);
  if (bucket.tokens >= needed) {
    bucket.tokens -= cost;
    return { allowed: true, waitMs: 0 };
  }
  return { allowed: false, waitMs: Math.ceil(((needed - bucket.tokens) * 1000) / rule.ratePerS) };
}

export function createMemoryTokenBuckets(): TokenBuckets {
  const buckets = new Map<string, Bucket>();
  return {
    async take(key, rule, cost = 1) {
      const nowMs = performance.now();
      let bucket = buckets.get(key);
      if (bucket === undefined) {
        if (buckets.size >= MEMORY_BUCKETS_MAX) {
          const oldest = buckets.keys().next();
          if (oldest.done !== true) buckets.delete(oldest.value);
        }
        bucket = { tokens: rule.burst, atMs: nowMs };
        buckets.set(key, bucket);
      }
      refill(bucket, rule, nowMs);
      return answer(bucket, rule, cost);
    },
  };
}

/**
 * The same arithmetic as the memory buckets, in one script so that concurrent instances never both
 * take the last token. The clock is Redis's own (TIME), so instances' clocks need not agree; a
 * bucket expires once it would be full again, so idle keys do not accumulate.
 */
const TAKE_SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + (now - at) * rate / 1000)
local needed = math.max(cost, 1)
local wait = 0
if tokens >= needed then tokens = tokens - cost else wait = math.ceil((needed - tokens) * 1000 / rate) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    payorchTakeToken(key: string, ratePerS: string, burst: string, cost: string): Result<number, Context>;
  }
}

function createRedisTokenBuckets(redis: Redis, prefix: string): TokenBuckets {
  redis.defineCommand('payorchTakeToken', { numberOfKeys: 1, lua: TAKE_SCRIPT });
  return {
    async take(key, rule, cost = 1) {
      const waitMs = await redis.payorchTakeToken(`${prefix}bucket:${key}`, String(rule.ratePerS), String(rule.burst), String(cost));
      return { allowed: waitMs === 0, waitMs };
    },
  };
}

export const createTokenBuckets = (shared: SharedState): TokenBuckets =>
  shared.redis === null ? createMemoryTokenBuckets() : createRedisTokenBuckets(shared.redis, shared.prefix);
