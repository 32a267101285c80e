import { timingSafeEqual, createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { apiError, type ErrorCode } from '../../domain/errors.js';
import type { Sql } from '../../adapters/database.js';
import { ConfigCache, type ConfigSnapshot } from '../../domain/config-cache.js';
import type { ServiceKey } from '../../domain/service-keys.js';
import { SIGNATURE_WINDOW_S, signatureMatches } from '../../domain/signing.js';

/**
 * none: public (health, docs). service: a signed request from an active key.
 * admin: a signed request from a key with `admin`, or the admin bearer token (R11).
 * resolve: as admin, but `forceResolve` also qualifies.
 */
export type AuthMode = 'none' | 'service' | 'admin' | 'resolve';

export interface Caller {
  /** null when the admin bearer token was used. */
  readonly key: ServiceKey | null;
  readonly serviceId: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
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
}

const EMPTY = Buffer.alloc(0);
const ADMIN_CALLER_ID = 'admin-token';

export function registerAuth(app: FastifyInstance, authDeps: AuthDeps): void {
  const deps = { ...authDeps, config: authDeps.config ?? new ConfigCache(authDeps.sql) };
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

  app.addHook('preValidation', async (request) => {
    const mode = request.routeOptions.config.auth ?? 'service';
    if (mode === 'none') return;
    request.rawBody ??= EMPTY;
    request.caller = await authenticate(request, mode, deps);
    if (request.body === MALFORMED_JSON) throw apiError('BAD_REQUEST', 'request body is not valid JSON');
  });
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

const unauthorized = (message: string) => apiError('UNAUTHORIZED', message);

async function authenticate(request: FastifyRequest, mode: AuthMode, deps: Required<AuthDeps>): Promise<Caller> {
  const authorization = header(request, 'authorization');
  if ((mode === 'admin' || mode === 'resolve') && authorization !== undefined && header(request, 'x-signature') === undefined) {
    if (!bearerMatches(authorization, deps.adminToken)) throw unauthorized('invalid bearer token');
    return { key: null, serviceId: ADMIN_CALLER_ID };
  }
  const { key, snapshot } = await verifySignature(request, deps);
  request.configSnapshot = snapshot;
  if (!key.active) throw apiError('FORBIDDEN', `service key ${key.serviceId} is inactive`);
  const allowed =
    mode === 'service' ||
    key.permissions.admin === true ||
    (mode === 'resolve' && key.permissions.forceResolve === true);
  if (!allowed) throw apiError('FORBIDDEN', `service ${key.serviceId} may not use admin operations`);
  return { key, serviceId: key.serviceId };
}

async function verifySignature(request: FastifyRequest, deps: Required<AuthDeps>): Promise<{ key: ServiceKey; snapshot: ConfigSnapshot }> {
  const serviceId = header(request, 'x-service-id');
  const timestamp = header(request, 'x-timestamp');
  const signature = header(request, 'x-signature');
  if (serviceId === undefined) throw unauthorized('missing header X-Service-Id');
  if (timestamp === undefined) throw unauthorized('missing header X-Timestamp');
  if (signature === undefined) throw unauthorized('missing header X-Signature');
  const secrets = deps.secrets().get(serviceId);
  if (secrets === undefined) throw unauthorized('unknown service');
  const nowS = Math.floor(Date.now() / 1000);
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowS - Number(timestamp)) > SIGNATURE_WINDOW_S) {
    throw unauthorized('timestamp outside window');
  }
  if (!signatureMatches(secrets, signature, timestamp, request.method, request.url, request.rawBody)) {
    throw unauthorized('invalid signature');
  }
  // Checked against the database's config version on every request: a key deactivated a
  // moment ago, by any instance or by hand, is refused on the very next call.
  const snapshot = await deps.config.fresh();
  const key = snapshot.serviceKeys.get(serviceId);
  // R3: a secret without a key record fails the permission step.
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
export function callerKey(request: FastifyRequest): ServiceKey {
  const { key } = request.caller;
  if (key === null) throw apiError('FORBIDDEN', 'this operation needs a signed service key');
  return key;
}
