import type { FastifyReply, FastifyRequest } from 'fastify';
import type { BucketAnswer, BucketRule, TokenBuckets } from '../../adapters/token-buckets.js';
import { ApiError, apiError } from '../../domain/errors.js';
import type { ServiceKeyGrant } from '../../domain/auth/service-keys.js';

/**
 * A source that keeps failing authentication is slowed down before its signature is even checked
 * (docs/SECURITY.md §5): a bucket of AUTH_FAILURE_BURST failures per source (20 by default),
 * refilled at one per AUTH_FAILURE_REFILL_MS. Past it, the source is answered 429 until a token
 * is back: a steady attacker gets one attempt every 3 s.
 */
export const AUTH_FAILURE_REFILL_MS = 3_000;

/** Bounded labels for payorch_auth_failures_total: a metric label never carries what the client sent. */
export const AUTH_FAILURE_REASONS = [
  'missing_header',
  'unknown_service',
  'bad_timestamp',
  'bad_digest',
  'bad_signature',
  'bad_bearer',
  'replayed',
  'scheme_refused',
  'malformed',
] as const;
export type AuthFailureReason = (typeof AUTH_FAILURE_REASONS)[number];

const REASON_BY_MESSAGE: ReadonlyArray<readonly [RegExp, AuthFailureReason]> = [
  [/^missing header Content-Digest|^content digest/, 'bad_digest'],
  [/^missing header/, 'missing_header'],
  [/^unknown service/, 'unknown_service'],
  [/^timestamp outside window|^signature expired/, 'bad_timestamp'],
  [/^invalid signature/, 'bad_signature'],
  [/bearer token/, 'bad_bearer'],
  [/^replayed/, 'replayed'],
  [/^this service must sign/, 'scheme_refused'],
];

export function authFailureReason(message: string): AuthFailureReason {
  return REASON_BY_MESSAGE.find(([pattern]) => pattern.test(message))?.[1] ?? 'malformed';
}

export type RateLimitReason = 'service_rate' | 'auth_failures' | 'streams';

export interface ThrottleMetrics {
  authFailure(reason: AuthFailureReason): void;
  rateLimited(reason: RateLimitReason): void;
}

export interface ThrottleLog {
  warn(bindings: object, message?: string): void;
}

/** 429 with Retry-After in whole seconds, at least 1, as the error catalogue documents. */
export function refuseRateLimited(reply: FastifyReply, waitMs: number, message: string): ApiError {
  void reply.header('retry-after', String(Math.max(1, Math.ceil(waitMs / 1000))));
  return apiError('RATE_LIMITED', message);
}

/**
 * Failures are counted twice: by address and the X-Service-Id the request claims, so that one
 * caller's failures slow that pair only, not every service behind the same egress address; and by
 * address alone, with ADDRESS_FAILURE_SHARE times the room, so that a caller who claims a new
 * X-Service-Id on every attempt is slowed all the same (docs/rules.md R61).
 */
export const ADDRESS_FAILURE_SHARE = 5;

function sourcesOf(request: FastifyRequest): { pair: string; address: string } {
  const claimed = request.headers['x-service-id'];
  return {
    pair: `auth-failures:${request.ip}:${typeof claimed === 'string' ? claimed.slice(0, 50) : '-'}`,
    address: `auth-failures-address:${request.ip}`,
  };
}

/**
 * Rate limits around authentication: the failing-source check before it, the failure count after
 * a refusal, the service's own bucket after a success. A bucket store that fails (Redis down)
 * lets the request through and says so in the log: a lost limit is better than stopped payments,
 * while the replay guards, whose failure would accept a replay, refuse instead (auth.ts).
 */
export class Throttle {
  private readonly failureRule: BucketRule;
  private readonly addressFailureRule: BucketRule;

  constructor(
    private readonly buckets: TokenBuckets,
    private readonly metrics: ThrottleMetrics | null,
    private readonly log: ThrottleLog,
    authFailureBurst: number,
  ) {
    this.failureRule = { ratePerS: 1000 / AUTH_FAILURE_REFILL_MS, burst: authFailureBurst };
    this.addressFailureRule = {
      ratePerS: (ADDRESS_FAILURE_SHARE * 1000) / AUTH_FAILURE_REFILL_MS,
      burst: ADDRESS_FAILURE_SHARE * authFailureBurst,
    };
  }

  private async take(key: string, rule: BucketRule, cost: number): Promise<BucketAnswer> {
    try {
      return await this.buckets.take(key, rule, cost);
    } catch (error) {
      this.log.warn({ event: 'rate_limit_unavailable', err: error }, 'rate-limit store unavailable; the request goes through unlimited');
      return { allowed: true, waitMs: 0 };
    }
  }

  async beforeAuthentication(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { pair, address } = sourcesOf(request);
    const [pairAnswer, addressAnswer] = await Promise.all([
      this.take(pair, this.failureRule, 0),
      this.take(address, this.addressFailureRule, 0),
    ]);
    if (pairAnswer.allowed && addressAnswer.allowed) return;
    this.metrics?.rateLimited('auth_failures');
    throw refuseRateLimited(reply, Math.max(pairAnswer.waitMs, addressAnswer.waitMs), 'too many failed authentications from this source');
  }

  async authenticationFailed(request: FastifyRequest, error: unknown): Promise<void> {
    if (!(error instanceof ApiError) || error.code !== 'UNAUTHORIZED') return;
    this.metrics?.authFailure(authFailureReason(error.message));
    const { pair, address } = sourcesOf(request);
    await Promise.all([this.take(pair, this.failureRule, 1), this.take(address, this.addressFailureRule, 1)]);
  }

  async authenticated(key: ServiceKeyGrant | null, reply: FastifyReply): Promise<void> {
    const limit = key?.permissions.rateLimit;
    if (key === null || limit === undefined) return;
    const answer = await this.take(`service:${key.serviceId}`, { ratePerS: limit.requestsPerSecond, burst: limit.burst }, 1);
    if (answer.allowed) return;
    this.metrics?.rateLimited('service_rate');
    throw refuseRateLimited(reply, answer.waitMs, `service ${key.serviceId} is over its rate limit`);
  }
}
