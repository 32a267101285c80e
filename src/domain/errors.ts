/**
 * The one catalogue of error codes the interface answers with, each with its HTTP status.
 * Clients decide on `error` alone; `message` is English for logs.
 */
export const ERROR_STATUS = {
  BAD_REQUEST: 400,
  NO_ROUTE: 400,
  CANCEL_NOT_SUPPORTED: 400,
  PAYER_ACCOUNT_USER_MISMATCH: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  UNAUTHORIZED_ACTOR: 403,
  NOT_FOUND: 404,
  INTENT_NOT_FOUND: 404,
  PAYER_ACCOUNT_NOT_FOUND: 404,
  PENDING_EXPIRED: 408,
  CONFLICT: 409,
  TRANSACTION_IN_PROGRESS: 409,
  ALREADY_PROCESSED: 409,
  EXPIRED: 409,
  VERSION_MISMATCH: 409,
  CANNOT_CANCEL: 409,
  /** A feed cursor older than the event retention: the events after it were pruned (docs/EVENTS.md). */
  CURSOR_EXPIRED: 410,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  VALIDATION_ERROR: 422,
  ACCOUNT_NOT_FOUND: 422,
  INSUFFICIENT_FUNDS: 422,
  LIMIT_EXCEEDED: 422,
  PSPX_NOT_REGISTERED: 422,
  PSPX_METADATA_INVALID: 422,
  EVAL_ERROR: 422,
  WRONG_STATUS: 422,
  RATE_LIMITED: 429,
  LEDGER_TRANSFER_ERROR: 500,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  PSPX_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export type ErrorBody = { error: ErrorCode; message?: string; detail?: Record<string, string> } & Record<string, unknown>;

/**
 * An expected failure with its code. `shape: 'bare'` gives the non-standard bodies of confirm and
 * cancel conflicts, which carry `error` and the listed extra fields but no message (docs/rules.md,
 * Error bodies).
 */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly detail: Record<string, string> | undefined;
  readonly extra: Record<string, unknown>;
  readonly bare: boolean;

  constructor(
    code: ErrorCode,
    message: string,
    options: { detail?: Record<string, string>; extra?: Record<string, unknown>; bare?: boolean } = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.statusCode = ERROR_STATUS[code];
    this.detail = options.detail;
    this.extra = options.extra ?? {};
    this.bare = options.bare ?? false;
  }

  toBody(): ErrorBody {
    if (this.bare) return { error: this.code, ...this.extra };
    return {
      error: this.code,
      message: this.message,
      ...(this.detail === undefined ? {} : { detail: this.detail }),
      ...this.extra,
    };
  }
}

export const apiError = (code: ErrorCode, message: string, options?: ConstructorParameters<typeof ApiError>[2]) =>
  new ApiError(code, message, options);

export function assertNever(value: never): never {
  throw new Error(`unexpected value ${JSON.stringify(value)}`);
}
