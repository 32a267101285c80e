import { ERROR_STATUS, type ErrorCode } from '@payorch/client';

/** The catalogue of codes and their statuses is the client package's, so both sides know the same codes. */
export { ERROR_STATUS, type ErrorCode };

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

export { assertNever } from '../assert-never.js';
