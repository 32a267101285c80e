import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ERROR_STATUS, type ErrorBody } from '../../domain/errors.js';
import { DATABASE_RETRY_AFTER_S, type DatabaseOutage, isDatabaseUnreachable } from '../../adapters/database-outage.js';
import { isStampRefusal } from '../../ledger/ledger.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Schema errors answer 422 by default; confirm answers 400 (docs/rules.md R6). */
    validationStatus?: 400 | 422;
    /** The quote endpoint lists validation issues under `details` (docs/rules.md, Error bodies). */
    validationDetails?: boolean;
  }
}

interface ValidationIssue {
  instancePath: string;
  message?: string;
  params?: Record<string, unknown>;
}

function issuePath(context: string | undefined, issue: ValidationIssue): string {
  const missing = issue.params?.missingProperty;
  const pointer = issue.instancePath + (typeof missing === 'string' ? `/${missing}` : '');
  return `${context ?? 'body'}${pointer.replaceAll('/', '.')}`;
}

/**
 * The one place where a failure becomes an HTTP answer. A database that cannot be reached is 503
 * with Retry-After, logged once per outage by `outage` rather than once per request (docs/rules.md R66).
 */
export function registerErrorHandling(app: FastifyInstance, production: boolean, outage?: DatabaseOutage): void {
  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    if (error instanceof ApiError) {
      request.log.warn({ code: error.code, statusCode: error.statusCode }, error.message);
      // Every 503 says when to come back, as the document promises.
      if (error.statusCode === 503 && !reply.hasHeader('retry-after')) void reply.header('retry-after', String(DATABASE_RETRY_AFTER_S));
      return reply.status(error.statusCode).send(error.toBody());
    }
    if (error.validation !== undefined) {
      const issues = error.validation.map((issue) => `${issuePath(error.validationContext, issue)}: ${issue.message ?? 'is invalid'}`);
      const status = request.routeOptions.config.validationStatus ?? 422;
      request.log.warn({ issues }, 'validation failed');
      const body: ErrorBody = request.routeOptions.config.validationDetails
        ? { error: 'VALIDATION_ERROR', details: issues }
        : { error: 'VALIDATION_ERROR', message: issues.join('; ') };
      return reply.status(status).send(body);
    }
    const clientError = mapClientError(error) ?? mapUnstorableText(error);
    if (clientError !== null) {
      request.log.warn({ code: error.code }, error.message);
      return reply.status(clientError.statusCode).send(clientError.toBody());
    }
    if (isDatabaseUnreachable(error)) {
      if (outage === undefined) request.log.error({ err: error }, 'database unreachable');
      else outage.failed(error);
      void reply.header('retry-after', String(DATABASE_RETRY_AFTER_S));
      return reply
        .status(503)
        .send(new ApiError('SERVICE_UNAVAILABLE', 'database unavailable; retry with the same idempotency key').toBody());
    }
    if (isStampRefusal(error)) {
      // Refused twice in a row (the group commit tried once more): the database stalls for seconds.
      request.log.error({ err: error }, 'ledger commit refused: stamped more than 2 s before its COMMIT, twice');
      void reply.header('retry-after', String(DATABASE_RETRY_AFTER_S));
      return reply
        .status(503)
        .send(
          new ApiError(
            'SERVICE_UNAVAILABLE',
            'the ledger is too slow to commit now; nothing was stored; retry with the same idempotency key',
          ).toBody(),
        );
    }
    request.log.error({ err: error }, 'request failed');
    return reply.status(500).send({ error: 'INTERNAL_ERROR', message: production ? 'Internal server error' : error.message });
  });

  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send({ error: 'NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0]}` }),
  );
}

/** Past this a refused path is cut in the message: it may be kilobytes long. */
const BAD_PATH_CHARS_MAX = 200;

/**
 * The router's refusals, which never reach setErrorHandler: a malformed percent-encoding and a
 * path parameter over the router's length limit (100 characters). Without this Fastify answers
 * them in its own body, the second with 414, a status the catalogue does not have.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const message = error.message.length > BAD_PATH_CHARS_MAX ? `${error.message.slice(0, BAD_PATH_CHARS_MAX)}…` : error.message;
  request.log.warn({ code: error.code }, message);
  void reply.status(ERROR_STATUS.BAD_REQUEST).send(new ApiError('BAD_REQUEST', message).toBody());
}

/**
 * SQLSTATEs of text the database cannot store: a NUL character (0x00 in text, \u0000 in jsonb)
 * is valid JSON and a valid URL escape, so it passes every schema and is refused only by
 * PostgreSQL. Both can come only from what the client sent, so they are its error, not a 500.
 */
const UNSTORABLE_TEXT_SQLSTATES = new Set(['22021', '22P05']);
/** A text longer than its column: every column's limit is in its route's schema, so this is the last line of defence. */
const TOO_LONG_SQLSTATE = '22001';

function mapUnstorableText(error: FastifyError): ApiError | null {
  const sqlState = (error as { code?: unknown }).code;
  if (sqlState === TOO_LONG_SQLSTATE) return new ApiError('VALIDATION_ERROR', 'a text is longer than its field allows');
  if (typeof sqlState !== 'string' || !UNSTORABLE_TEXT_SQLSTATES.has(sqlState)) return null;
  return new ApiError('VALIDATION_ERROR', 'text must not contain NUL characters');
}

/** Fastify's own 4xx errors (body parsing, content type, size) in the house format. */
function mapClientError(error: FastifyError): ApiError | null {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('PAYLOAD_TOO_LARGE', 'request body exceeds 64 KiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'content type must be application/json');
    default:
      if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
        return new ApiError('BAD_REQUEST', error.message);
      }
      return null;
  }
}
