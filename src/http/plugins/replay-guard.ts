import type { FastifyRequest } from 'fastify';
import type { ClaimOptions, SharedState } from '../../adapters/shared-state.js';
import { apiError } from '../../domain/errors.js';
import { SIGNATURE_WINDOW_S, sha256Hex } from '../../domain/auth/signing.js';

/**
 * Twice the signature window: a request signed at the far end of ±60 s stays acceptable for
 * 120 s from the moment it is first seen, so its claim must live that long (docs/SECURITY.md §3).
 */
export const REPLAY_WINDOW_MS = 2 * SIGNATURE_WINDOW_S * 1000;

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** A write to the admin API, judged by the route it matched rather than the raw URL. */
export function isAdminWrite(request: FastifyRequest): boolean {
  const route = request.routeOptions.url ?? '';
  return WRITE_METHODS.has(request.method) && (route === '/admin' || route.startsWith('/admin/'));
}

/** Hashed so that every key has one length and no service id can run into the value after it. */
const keyOf = (kind: string, parts: readonly string[]) => `${kind}:${sha256Hex(JSON.stringify(parts))}`;

/**
 * A replay cache that cannot answer (Redis down) refuses the request with 503: accepting it could
 * accept a replay, and the caller may safely try again (docs/SECURITY.md §3).
 */
async function claim(shared: SharedState, key: string, options?: ClaimOptions): Promise<boolean> {
  try {
    return await shared.claimOnce(key, REPLAY_WINDOW_MS, options);
  } catch {
    throw apiError('SERVICE_UNAVAILABLE', 'replay cache unavailable; try again');
  }
}

/** Called only once the signature verified: a forged request must not be able to burn a real one's slot. */
export async function claimNonce(shared: SharedState, serviceId: string, nonce: string): Promise<void> {
  if (!(await claim(shared, keyOf('nonce', [serviceId, nonce])))) throw apiError('UNAUTHORIZED', 'replayed nonce');
}

/**
 * `signature` in a canonical form of its scheme (lower-case hex), so that one signature has one key.
 * Kept in the database as well as Redis: an admin write has no idempotency key to stop its replay,
 * and a Redis outage (or a flood that makes Redis miss its bound) must not forget its record. Admin
 * writes are few, so the extra round trip costs nothing a payment feels.
 */
export async function claimAdminWrite(
  shared: SharedState,
  serviceId: string,
  scheme: 'x-signature' | 'message',
  signature: string,
): Promise<void> {
  if (!(await claim(shared, keyOf('admin-write', [serviceId, scheme, signature]), { survivesRedisOutage: true })))
    throw apiError('UNAUTHORIZED', 'replayed request');
}
