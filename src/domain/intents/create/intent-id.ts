import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

const ID_RANDOM_BYTES = 16;
/** Random bytes for 256 ids, drawn from the operating system at once. */
const POOL_BYTES = 256 * ID_RANDOM_BYTES;
const pool = new Uint8Array(POOL_BYTES);
let poolNext = POOL_BYTES;

/**
 * The `uuid` package's v7 asks Web Crypto's `getRandomValues` for 16 bytes on every call, which
 * on Node 20 costs 5–10 µs against under 1 µs for a slice of a pool (docs/perf-log/2026-11.md,
 * "the intent id's random bytes"). The bytes are read by the id's construction before anything
 * else runs, so the slot is not handed out twice.
 */
function randomBytesForId(): Uint8Array {
  if (poolNext + ID_RANDOM_BYTES > POOL_BYTES) {
    randomFillSync(pool);
    poolNext = 0;
  }
  const bytes = pool.subarray(poolNext, poolNext + ID_RANDOM_BYTES);
  poolNext += ID_RANDOM_BYTES;
  return bytes;
}

/**
 * The package's v7 keeps its monotonic state only when called without options; given the random
 * bytes it would also need the millisecond and the sequence, so they are kept here, by its rule
 * (RFC 9562 §6.2, method 1): a new millisecond starts the 31-bit counter at a random value, a
 * repeated one counts on, and a counter that wraps moves the millisecond on.
 */
let lastMs = Number.NEGATIVE_INFINITY;
let sequence = 0;

/** A new intent's id: UUID v7, time-ordered, so the intent tables' indexes grow at their end (money-path.ts, transferId). */
export function newIntentId(): string {
  const random = randomBytesForId();
  const now = Date.now();
  if (now > lastMs) {
    sequence = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
    lastMs = now;
  } else {
    sequence = (sequence + 1) | 0;
    if (sequence === 0) lastMs++;
  }
  return uuidv7({ random, msecs: lastMs, seq: sequence });
}
