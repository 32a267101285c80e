import { ERROR_STATUS, type ErrorCode } from './vocabulary.js';

/** A code of the service's catalogue, or UNKNOWN for an answer without one (a proxy's 502, the health probe's 503). */
export type PayorchErrorCode = ErrorCode | 'UNKNOWN';

/** The error body as on the wire: `error` and `message`, plus the fields some codes add (`detail`, `status`, `currentVersion`). */
export interface PayorchErrorBody {
  readonly error?: string;
  readonly message?: string;
  readonly detail?: Readonly<Record<string, string>>;
  readonly [field: string]: unknown;
}

const isCatalogueCode = (value: unknown): value is ErrorCode => typeof value === 'string' && Object.hasOwn(ERROR_STATUS, value);

/**
 * The service answered with a 4xx or 5xx. Callers decide on `code` alone (docs/rules.md, Error bodies); `body`
 * keeps the whole answer (a string when it was not JSON) for the fields that some codes carry.
 */
export class PayorchError extends Error {
  override readonly name = 'PayorchError';
  readonly status: number;
  readonly code: PayorchErrorCode;
  readonly body: PayorchErrorBody | string;

  constructor(status: number, body: PayorchErrorBody | string) {
    const code = typeof body === 'object' && isCatalogueCode(body.error) ? body.error : 'UNKNOWN';
    const text = typeof body === 'object' ? body.message : body;
    super(`${status} ${code}${text === undefined || text === '' ? '' : `: ${text}`}`);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/** No answer at all, after every attempt: connection refused or reset, DNS failure, time-out. */
export class PayorchConnectionError extends Error {
  override readonly name = 'PayorchConnectionError';
  readonly attempts: number;

  constructor(message: string, attempts: number, cause: unknown) {
    super(message, { cause });
    this.attempts = attempts;
  }
}
