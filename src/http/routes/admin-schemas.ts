import Type, { type TSchema } from 'typebox';
import { Permissions } from '../../config.js';
import { EXPRESSION_LENGTH_MAX } from '../../domain/fees/index.js';
import { LIMIT_DIRECTIONS, LIMIT_TYPES, LIMIT_WINDOWS } from '../../domain/admin/limit-rules.js';
import { CHANNELS, OPERATION_TYPES, STEP_UP_LEVELS } from '../../domain/model.js';
import { Money } from '../schemas.js';

/**
 * Request and response schemas of the admin API. Field names follow CONFIG_FILE (docs/rules.md R20, R21):
 * what an operator writes in the config is what the API takes. Money and limits go in as JSON
 * integers and come out as decimal strings. Defaults are those of the table columns and are
 * only described here: a schema default would also fill in absent fields of a PATCH.
 */

const amount = (description: string) => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });
/** Priorities order a handful of rules; the bound keeps them far inside the integer column. */
const PRIORITY_ABS_MAX = 1_000_000;
const priority = (description: string) => Type.Integer({ minimum: -PRIORITY_ABS_MAX, maximum: PRIORITY_ABS_MAX, description });
const Active = Type.Boolean({ description: 'default true; inactive records are ignored' });
const Timestamp = Type.String({ description: 'ISO 8601 UTC' });
const OperationType = Type.Enum(OPERATION_TYPES);
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 50 }), { maxItems: 50 });

/** Builds the create body (required fields as listed) and the PATCH body (any non-empty subset). */
function bodies<F extends Record<string, TSchema>>(fields: F, required: readonly (keyof F & string)[]) {
  const create = Type.Object(
    Object.fromEntries(Object.entries(fields).map(([name, schema]) => [name, required.includes(name) ? schema : Type.Optional(schema)])),
    { additionalProperties: false },
  );
  const patch = Type.Object(
    Object.fromEntries(Object.entries(fields).map(([name, schema]) => [name, Type.Optional(schema)])),
    { additionalProperties: false, minProperties: 1 },
  );
  return { create, patch };
}

// Fee rules -------------------------------------------------------------------------------------

const feeRuleFields = {
  name: Type.String({ minLength: 1, maxLength: 100 }),
  operationType: OperationType,
  expression: Type.String({ minLength: 1, maxLength: EXPRESSION_LENGTH_MAX, description: 'returns [{account, amount}]' }),
  timing: Type.Enum(['PRE', 'POST'], { description: 'default PRE' }),
  tagsInclude: Tags,
  tagsExclude: Tags,
  priority: priority('ascending, default 0'),
  active: Active,
};
export const FeeRuleBodies = bodies(feeRuleFields, ['name', 'operationType', 'expression']);
export const FeeRule = Type.Object({
  id: Type.Integer(),
  ...feeRuleFields,
  createdAt: Timestamp,
});

// Routes ----------------------------------------------------------------------------------------

const routeFields = {
  operationType: OperationType,
  minAmount: amount('satang, default 1'),
  maxAmount: Type.Union([amount('satang'), Type.Null()], { description: 'null (default) is unbounded' }),
  channel: Type.Enum(CHANNELS),
  priority: priority('ascending: the first route holding the amount wins; default 0'),
  active: Active,
};
export const RouteBodies = bodies(routeFields, ['operationType', 'channel']);
export const Route = Type.Object({
  id: Type.Integer(),
  operationType: OperationType,
  minAmount: Money,
  maxAmount: Type.Union([Money, Type.Null()]),
  channel: Type.Enum(CHANNELS),
  priority: Type.Integer(),
  active: Type.Boolean(),
  createdAt: Timestamp,
});

// Limit rules -----------------------------------------------------------------------------------

const LimitOperationType = Type.Enum(['*', ...OPERATION_TYPES], { description: "'*' (default) is every operation type" });
const limitRuleFields = {
  name: Type.String({ minLength: 1, maxLength: 100 }),
  operationType: LimitOperationType,
  direction: Type.Enum(LIMIT_DIRECTIONS),
  window: Type.Enum(LIMIT_WINDOWS),
  limitType: Type.Enum(LIMIT_TYPES),
  limit: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'satang for AMOUNT, intents for COUNT' }),
  currency: Type.String({ minLength: 3, maxLength: 3, description: 'default THB' }),
  active: Active,
};
export const LimitRuleBodies = bodies(limitRuleFields, ['name', 'direction', 'window', 'limitType', 'limit']);
export const LimitRule = Type.Object({
  id: Type.Integer(),
  ...limitRuleFields,
  limit: Type.String({ pattern: '^[0-9]+$', description: 'satang for AMOUNT, intents for COUNT, as a decimal string' }),
  createdAt: Timestamp,
});

// Auth policies ---------------------------------------------------------------------------------

/** Known keys are type-checked; other keys are stored and ignored by evaluation (docs/rules.md, Step-up policies). */
const Condition = Type.Object(
  {
    amount_lt: Type.Optional(Type.Number()),
    amount_gte: Type.Optional(Type.Number()),
    amount_lte: Type.Optional(Type.Number()),
    currency: Type.Optional(Type.String({ minLength: 3, maxLength: 3 })),
    daily_cumulative_gte: Type.Optional(Type.Number()),
    new_payee: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true, description: 'all present keys must hold (AND); {} matches everything' },
);
const authPolicyFields = {
  scope: Type.String({
    maxLength: 80,
    pattern: '^(global|app:.{1,50}|merchant:[1-9][0-9]{0,15})$',
    description: "'global', 'app:{appId}' or 'merchant:{merchantId}'",
  }),
  condition: Condition,
  requiredStepUp: Type.Enum(STEP_UP_LEVELS),
  reasonCode: Type.String({ minLength: 1, maxLength: 50 }),
  priority: priority('ascending, default 100'),
  active: Active,
};
export const AuthPolicyBodies = bodies(authPolicyFields, ['scope', 'requiredStepUp', 'reasonCode']);
export const AuthPolicy = Type.Object({
  id: Type.Integer(),
  ...authPolicyFields,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

// Service keys ----------------------------------------------------------------------------------

const ServiceId = Type.String({ minLength: 1, maxLength: 50, pattern: '^[A-Za-z0-9._-]+$' });
export const ServiceKeyBodies = {
  create: Type.Object(
    { serviceId: ServiceId, permissions: Permissions, active: Type.Optional(Active) },
    { additionalProperties: false, description: 'the secret is set in CONFIG_FILE and loaded by a reload, never here' },
  ),
  patch: Type.Object(
    { permissions: Type.Optional(Permissions), active: Type.Optional(Active) },
    { additionalProperties: false, minProperties: 1, description: 'permissions replace the stored object as a whole' },
  ),
};
export const ServiceKey = Type.Object({
  serviceId: Type.String(),
  active: Type.Boolean(),
  permissions: Permissions,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

// Keys, lists, system ---------------------------------------------------------------------------

export const IdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });
export const ServiceIdParams = Type.Object({ serviceId: ServiceId });

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
