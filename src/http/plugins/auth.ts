import { timingSafeEqual, createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { apiError, type ErrorCode } from '../../domain/errors.js';
import type { Sql } from '../../adapters/database.js';
import { createMemorySharedState, type SharedState } from '../../adapters/shared-state.js';
import { ConfigCache } from '../../domain/auth/config-cache.js';
import type { ConfigSnapshot } from '../../domain/auth/config-snapshot.js';
import type { ServiceKeyGrant } from '../../domain/auth/service-keys.js';
import { SIGNATURE_WINDOW_S, signatureMatches } from '../../domain/auth/signing.js';
import { verifyMessageSignature } from './message-signature.js';
import { claimAdminWrite, claimNonce, isAdminWrite } from './replay-guard.js';
import { Throttle } from './throttle.js';
import { addRequestLogFields } from '../log-options.js';
import { AUTH_FAILURE_BURST_DEFAULT } from '../../config.js';
import { createMemoryTokenBuckets } from '../../adapters/token-buckets.js';

/**
 * none: public (health, docs). service: a signed request from an active key.
 * admin: a signed request from a key with `admin`, or the admin bearer token (docs/rules.md R11).
 * resolve: as admin, but `forceResolve` also qualifies.
 */
export type AuthMode = 'none' | 'service' | 'admin' | 'resolve';

export interface Caller {
  /** null when the admin bearer token was used. */
  readonly key: ServiceKeyGrant | null;
  readonly serviceId: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
    /** The handler reads X-User-Id with requireUserId: the OpenAPI document lists the header as required. */
    userIdHeader?: 'required';
  }
  interface FastifyRequest {
    caller: Caller;
    rawBody: Buffer;
    /** The configuration this request was authenticated against; null for the bearer token and public routes. */
    configSnapshot: ConfigSnapshot | null;
  }
}

export const BODY_LIMIT_BYTES = 64 * 1024;
/** Marks a body that is not JSON: refused after the signature check, so an unsigned caller learns nothing. */
export const MALFORMED_JSON = Symbol('malformed JSON');

export interface AuthDeps {
  readonly sql: Sql;
  /** Service keys come from here: one version read per request, not a key read (config-cache.ts). Absent: one of its own on `sql`. */
  readonly config?: ConfigCache;
  readonly secrets: () => ReadonlyMap<string, readonly string[]>;
  readonly adminToken: string | undefined;
  /** Replay caches (nonces, admin writes), shared between instances through Redis. Absent: one in this process. */
  readonly shared?: SharedState;
  /** Rate limits and the failing-source slow-down. Absent: buckets in this process, no metrics. */
  readonly throttle?: Throttle;
}

const EMPTY = Buffer.alloc(0);
const ADMIN_CALLER_ID = 'admin-token';

export function registerAuth(app: FastifyInstance, authDeps: AuthDeps): void {
  const deps = {
    ...authDeps,
    config: authDeps.config ?? new ConfigCache(authDeps.sql),
    shared: authDeps.shared ?? createMemorySharedState(),
    throttle: authDeps.throttle ?? new Throttle(createMemoryTokenBuckets(), null, app.log, AUTH_FAILURE_BURST_DEFAULT),
  };
  app.decorateRequest('caller', null as unknown as Caller);
  app.decorateRequest('rawBody', null as unknown as Buffer);
  app.decorateRequest('configSnapshot', null);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(['application/json'], { parseAs: 'buffer', bodyLimit: BODY_LIMIT_BYTES }, (request, body, done) => {
    const raw = body as Buffer;
    request.rawBody = raw;
    if (raw.length === 0) return done(null, undefined);
    try {
      done(null, JSON.parse(raw.toString('utf8')));
    } catch {
      done(null, MALFORMED_JSON);
    }
  });

  app.addHook('preValidation', async (request, reply) => {
    const mode = request.routeOptions.config.auth ?? 'service';
    if (mode === 'none') return;
    request.rawBody ??= EMPTY;
    await deps.throttle.beforeAuthentication(request, reply);
    let verified: VerifiedRequest | null;
    try {
      ({ caller: request.caller, verified } = await authenticate(request, mode, deps));
    } catch (error) {
      await deps.throttle.authenticationFailed(request, error);
      throw error;
    }
    // Only once the signature is verified: an unverified X-Service-Id is the caller's claim, not a fact.
    addRequestLogFields(request, reply, { serviceId: request.caller.serviceId });
    // Before the body is validated or any domain work: an over-limit request changes nothing.
    await deps.throttle.authenticated(request.caller.key, reply);
    // Only a request the rate limit admitted takes a replay record (docs/rules.md R61): a flood
    // over the limit fills no store.
    if (verified !== null) {
      try {
        await claimReplayRecords(request, verified, deps.shared);
      } catch (error) {
        await deps.throttle.authenticationFailed(request, error);
        throw error;
      }
    }
    if (request.body === MALFORMED_JSON) throw apiError('BAD_REQUEST', 'request body is not valid JSON');
  });
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

const unauthorized = (message: string) => apiError('UNAUTHORIZED', message);

/** What a verified signature tells: who signed, under which scheme, and what the replay guards key on. */
interface VerifiedRequest {
  readonly serviceId: string;
  readonly scheme: 'x-signature' | 'message';
  /** Canonical per scheme: lower-case hex for both. */
  readonly signature: string;
  readonly nonce: string | undefined;
}

/** The 401 message for a bearer token sent to a server started without ADMIN_TOKEN: the console shows it as it is. */
export const NO_ADMIN_TOKEN_MESSAGE =
  'this server has no ADMIN_TOKEN: restart it with ADMIN_TOKEN set in its environment (e.g. ADMIN_TOKEN=<token> npm start) to sign in with a bearer token';

/** Who the caller is, and the verified signature whose replay records are still to be taken (null for the bearer token). */
async function authenticate(
  request: FastifyRequest,
  mode: AuthMode,
  deps: Required<AuthDeps>,
): Promise<{ caller: Caller; verified: VerifiedRequest | null }> {
  const authorization = header(request, 'authorization');
  const signed = header(request, 'x-signature') !== undefined || header(request, 'signature-input') !== undefined;
  if ((mode === 'admin' || mode === 'resolve') && authorization !== undefined && !signed) {
    // Said apart, so that an operator who opens the console on a server started without one learns why.
    if (deps.adminToken === undefined) throw unauthorized(NO_ADMIN_TOKEN_MESSAGE);
    if (!bearerMatches(authorization, deps.adminToken)) throw unauthorized('invalid bearer token');
    return { caller: { key: null, serviceId: ADMIN_CALLER_ID }, verified: null };
  }
  const verified = verifyRequest(request, deps);
  const { key, snapshot } = await serviceKeyOf(verified.serviceId, deps);
  request.configSnapshot = snapshot;
  if (verified.scheme === 'x-signature' && key.permissions.requireMessageSignatures === true) {
    throw unauthorized('this service must sign with an HTTP message signature (Signature-Input)');
  }
  if (!key.active) throw apiError('FORBIDDEN', `service key ${key.serviceId} is inactive`);
  const allowed = mode === 'service' || key.permissions.admin === true || (mode === 'resolve' && key.permissions.forceResolve === true);
  if (!allowed) throw apiError('FORBIDDEN', `service ${key.serviceId} may not use admin operations`);
  return { caller: { key, serviceId: key.serviceId }, verified };
}

/**
 * On a verified signature only: a forged request must not burn a genuine one's slot. The admin
 * write first, so that a replayed one is called that whether it has a nonce or not.
 */
async function claimReplayRecords(request: FastifyRequest, verified: VerifiedRequest, shared: SharedState): Promise<void> {
  if (isAdminWrite(request)) await claimAdminWrite(shared, verified.serviceId, verified.scheme, verified.signature);
  if (verified.nonce !== undefined) await claimNonce(shared, verified.serviceId, verified.nonce);
}

/** A request carrying Signature-Input is judged as an HTTP Message Signature, any other by X-Signature (docs/SECURITY.md §2). */
function verifyRequest(request: FastifyRequest, deps: Required<AuthDeps>): VerifiedRequest {
  const nowS = Math.floor(Date.now() / 1000);
  const signatureInput = header(request, 'signature-input');
  if (signatureInput !== undefined) {
    const message = verifyMessageSignature(request, signatureInput, (serviceId) => deps.secrets().get(serviceId), nowS);
    return { serviceId: message.serviceId, scheme: 'message', signature: message.signature.toString('hex'), nonce: message.nonce };
  }
  const serviceId = header(request, 'x-service-id');
  const timestamp = header(request, 'x-timestamp');
  const signature = header(request, 'x-signature');
  if (serviceId === undefined) throw unauthorized('missing header X-Service-Id');
  if (timestamp === undefined) throw unauthorized('missing header X-Timestamp');
  if (signature === undefined) throw unauthorized('missing header X-Signature');
  const secrets = deps.secrets().get(serviceId);
  if (secrets === undefined) throw unauthorized('unknown service');
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowS - Number(timestamp)) > SIGNATURE_WINDOW_S) {
    throw unauthorized('timestamp outside window');
  }
  if (!signatureMatches(secrets, signature, timestamp, request.method, request.url, request.rawBody)) {
    throw unauthorized('invalid signature');
  }
  // signatureMatches accepts lower-case hex only, so the text is already canonical.
  return { serviceId, scheme: 'x-signature', signature, nonce: undefined };
}

async function serviceKeyOf(serviceId: string, deps: Required<AuthDeps>): Promise<{ key: ServiceKeyGrant; snapshot: ConfigSnapshot }> {
  // Checked against the database's config version on every request: a key deactivated a
  // moment ago, by any instance or by hand, is refused on the very next call.
  const snapshot = await deps.config.fresh();
  const key = snapshot.serviceKeys.get(serviceId);
  // A secret without a key record fails the permission step (docs/rules.md, Key records).
  if (key === undefined) throw apiError('FORBIDDEN', `service ${serviceId} has no service key record`);
  return { key, snapshot };
}

export function bearerMatches(authorization: string, token: string | undefined): boolean {
  if (token === undefined) return false;
  const match = /^Bearer (.+)$/.exec(authorization);
  if (match?.[1] === undefined) return false;
  // Hash both sides so the comparison is constant-time whatever the lengths.
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(match[1]), digest(token));
}

/**
 * X-User-Id: the platform user acting; 0 is the admin bypass. Each endpoint names the code a
 * missing or malformed value gets (400 BAD_REQUEST for intents, 422 for accounts, …).
 */
export function requireUserId(request: FastifyRequest, code: ErrorCode = 'BAD_REQUEST'): number {
  const raw = header(request, 'x-user-id');
  if (raw === undefined) throw apiError(code, 'missing header X-User-Id');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw apiError(code, 'X-User-Id must be a non-negative integer');
  }
  return Number(raw);
}

/** Permissions of the signed key; the admin token carries every admin permission and no operation type. */
export function callerKey(request: FastifyRequest): ServiceKeyGrant {
  const { key } = request.caller;
  if (key === null) throw apiError('FORBIDDEN', 'this operation needs a signed service key');
  return key;
}
