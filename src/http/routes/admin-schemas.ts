import Type from 'typebox';

/**
 * Schemas of the admin API that belong to no record: keys, list pages and the process switches.
 * The records' own schemas live with each record in domain/admin.
 */

export const IdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });

/** Admin tables hold configuration, not traffic: one page is normally all of it. */
export const LIST_PAGE_MAX = 500;
export const ListQuery = Type.Object(
  {
    active: Type.Optional(Type.Boolean({ description: 'only active (true) or inactive (false) records' })),
    limit: Type.Integer({ minimum: 1, maximum: LIST_PAGE_MAX, default: LIST_PAGE_MAX }),
    offset: Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 0 }),
  },
  { additionalProperties: false },
);

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LogLevelBody = Type.Object({ level: Type.Enum(LOG_LEVELS) }, { additionalProperties: false });
export const LogLevelResponse = Type.Object({
  level: Type.String(),
  previous: Type.Optional(Type.String()),
});
export const ReloadResponse = Type.Object({ services: Type.Integer({ description: 'services with at least one secret' }) });
