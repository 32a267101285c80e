import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** The header a caller may send to name its request, and in which the id is answered. */
export const REQUEST_ID_HEADER = 'x-request-id';
/** An id a log search can hold: short, and nothing that could forge a log field or a header. */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** The caller's X-Request-Id when it is acceptable, else a new UUID (never a rejection: the id is only for tracing). */
export function requestIdOf(request: IncomingMessage): string {
  const sent = request.headers[REQUEST_ID_HEADER];
  return typeof sent === 'string' && ACCEPTED_REQUEST_ID.test(sent) ? sent : randomUUID();
}
