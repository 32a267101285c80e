import assert from 'node:assert/strict';
import { hash } from 'node:crypto';

const NAMESPACE_BYTES = 16;
/** The longest name hashed in place, in UTF-16 units; a unit is at most 3 bytes of UTF-8. Names here are ids and account names. */
const NAME_LENGTH_MAX = 4_096;
/** Reused by every call: the name is written and hashed before anything else can run. */
const scratch = Buffer.alloc(NAMESPACE_BYTES + NAME_LENGTH_MAX * 3);

/**
 * RFC 9562 UUID version 5 of a name (its UTF-8 bytes) in a namespace: what the `uuid` package's v5
 * answers, from one SHA-1 of a reused buffer, written out from its hex. The package's v5 builds a
 * Hash object, copies the name twice and writes the text digit by digit: ~2 KB and ~3 µs a call,
 * and a payment takes six (docs/perf-log/2026-11.md, "payorch's allocation and CPU per intent").
 */
export function uuidV5(namespace: Uint8Array, name: string): string {
  assert.equal(namespace.length, NAMESPACE_BYTES, 'a UUID namespace is 16 bytes');
  assert.ok(name.length <= NAME_LENGTH_MAX, `a UUID v5 name of at most ${NAME_LENGTH_MAX} characters`);
  scratch.set(namespace, 0);
  const nameBytes = scratch.write(name, NAMESPACE_BYTES, 'utf8');
  const hex = hash('sha1', scratch.subarray(0, NAMESPACE_BYTES + nameBytes), 'hex');
  // The version (5) is the 13th digit; the variant (binary 10) the top two bits of the 17th.
  const variant = ((Number.parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
