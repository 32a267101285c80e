import Type, { type Static, type TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { apiError } from '../errors.js';
import { namePatternProblem } from '../auth/name-pattern.js';
import { ACCOUNT_TYPES, ENTITY_TYPES } from '../model.js';
import { ServiceId } from '../wire-types.js';
import { WEBHOOK_URL_LENGTH_MAX, webhookUrlProblem } from '../events/webhooks/webhook-url.js';
import { type AdminEntity, read } from '../admin/admin-entity.js';
import { ActiveField, Timestamp } from '../admin/record-schema.js';

const AccountOverrideFields = { allowedTypes: Type.Array(Type.Enum(ACCOUNT_TYPES)), namePattern: Type.String() };
const AccountOverride = Type.Object(AccountOverrideFields, { additionalProperties: false });
const RateLimitFields = {
  requestsPerSecond: Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000 }),
  burst: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
};
const WebhookFields = {
  url: Type.String({
    minLength: 1,
    maxLength: WEBHOOK_URL_LENGTH_MAX,
    description: 'http or https, no credentials, the host written as dialled (docs/SECURITY.md, Webhook URLs)',
  }),
};

/** What a service key may do: the same object in CONFIG_FILE, /admin/service-keys and the config cache. */
export const Permissions = Type.Object(
  {
    allowedOperationTypes: Type.Array(Type.String({ maxLength: 50 })),
    merchantId: Type.Optional(Type.Integer({ minimum: 1 })),
    forceResolve: Type.Optional(Type.Boolean()),
    /** May refund its service's settled intents (docs/rules.md R57). */
    refunds: Type.Optional(Type.Boolean()),
    admin: Type.Optional(Type.Boolean()),
    allowToLedgerAccountId: Type.Optional(Type.Boolean()),
    fromAccountOverride: Type.Optional(AccountOverride),
    toAccountOverride: Type.Optional(AccountOverride),
    accountEntityTypes: Type.Optional(Type.Array(Type.Enum(ENTITY_TYPES))),
    /** Refuse the older X-Signature (docs/rules.md R1) for this key: only RFC 9421 message signatures verify. */
    requireMessageSignatures: Type.Optional(Type.Boolean()),
    /** A token bucket per service id: `requestsPerSecond` refill, `burst` capacity. Absent: no limit. */
    rateLimit: Type.Optional(Type.Object(RateLimitFields, { additionalProperties: false })),
    /** Where this service's events are POSTed, signed with its secret (docs/OPERATIONS.md, Webhooks). */
    webhook: Type.Optional(Type.Object(WebhookFields, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type Permissions = Static<typeof Permissions>;

/** A field a merge patch may remove with null. */
const removable = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));
/** Every field of a nested object a merge patch names is merged on its own (RFC 7396). */
const partialObject = (fields: Record<string, TSchema>) =>
  removable(
    Type.Object(Object.fromEntries(Object.entries(fields).map(([name, schema]) => [name, removable(schema)])), {
      additionalProperties: false,
    }),
  );

/**
 * PATCH's `permissions`: a JSON merge patch (RFC 7396, docs/rules.md R62) of the stored object. A
 * field absent keeps its value, null removes it, a nested object is merged field by field; the
 * merged object must then be a valid Permissions.
 */
const PermissionsPatch = Type.Object(
  {
    allowedOperationTypes: Type.Optional(Permissions.properties.allowedOperationTypes),
    merchantId: removable(Type.Integer({ minimum: 1 })),
    forceResolve: removable(Type.Boolean()),
    refunds: removable(Type.Boolean()),
    admin: removable(Type.Boolean()),
    allowToLedgerAccountId: removable(Type.Boolean()),
    fromAccountOverride: partialObject(AccountOverrideFields),
    toAccountOverride: partialObject(AccountOverrideFields),
    accountEntityTypes: removable(Type.Array(Type.Enum(ENTITY_TYPES))),
    requireMessageSignatures: removable(Type.Boolean()),
    rateLimit: partialObject(RateLimitFields),
    webhook: partialObject(WebhookFields),
  },
  {
    additionalProperties: false,
    description:
      'a JSON merge patch (RFC 7396) of the stored permissions: absent fields keep their value, null removes one, nested objects merge field by field',
  },
);

/** A permission added to Permissions and not to its patch would be refused by every PATCH: the compiler keeps them one. */
type SameKeys<A, B> = [keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : false) : false;
const patchNamesEveryPermission: SameKeys<typeof PermissionsPatch.properties, Permissions> = true;
void patchNamesEveryPermission;

/** RFC 7396 §2, as written there: objects merge member by member, null removes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const merged: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) delete merged[name];
    else merged[name] = mergePatch(merged[name], value);
  }
  return merged;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export const ServiceIdParams = Type.Object({ serviceId: ServiceId });

/** The secret is set in CONFIG_FILE and loaded by a reload, never through the API or the database. */
export const ServiceKeyInputs = {
  /** Also a CONFIG_FILE `serviceKeys` entry. */
  create: Type.Object(
    { serviceId: ServiceId, permissions: Permissions, active: Type.Optional(ActiveField) },
    { additionalProperties: false, description: 'the secret is set in CONFIG_FILE and loaded by a reload, never here' },
  ),
  patch: Type.Object(
    { permissions: Type.Optional(PermissionsPatch), active: Type.Optional(ActiveField) },
    { additionalProperties: false, minProperties: 1, description: 'permissions are merged into the stored object (RFC 7396)' },
  ),
};
export type ServiceKeyInput = Static<typeof ServiceKeyInputs.create>;
export type ServiceKeyPatch = Static<typeof ServiceKeyInputs.patch>;

/** The key record only: secrets live in CONFIG_FILE and memory, never here (docs/rules.md, Key records). */
export const ServiceKey = Type.Object({
  serviceId: Type.String(),
  active: Type.Boolean(),
  permissions: Permissions,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type ServiceKeyRecord = Readonly<Static<typeof ServiceKey>>;

/** What a request is checked against: the key as the config snapshot holds it (auth/config-cache.ts). */
export type ServiceKeyGrant = Pick<ServiceKeyRecord, 'serviceId' | 'active' | 'permissions'>;

export const serviceKeys: AdminEntity<ServiceKeyRecord> = {
  entity: 'service-key',
  table: 'service_keys',
  keyColumn: 'service_id',
  columns: {
    serviceId: { column: 'service_id' },
    active: { column: 'active' },
    permissions: { column: 'permissions', cast: '::jsonb', encode: (value) => JSON.stringify(value) },
  },
  hasUpdatedAt: true,
  orderBy: 'service_id',
  fromRow: (row) => ({
    serviceId: read.string(row.service_id),
    active: read.boolean(row.active),
    // Every write of the column passed the Permissions schema (API and CONFIG_FILE alike).
    permissions: read.object(row.permissions) as Permissions,
    createdAt: read.timestamp(row.created_at),
    updatedAt: read.timestamp(row.updated_at),
  }),
  keyOf: (record) => record.serviceId,
  mergePatch: (before, patch) =>
    patch.permissions === undefined ? patch : { ...patch, permissions: mergePatch(before.permissions, patch.permissions) },
};

/**
 * What the schema cannot say about a permissions object, as `field: problem` lines: override
 * patterns are used as regular expressions on every intent, and the webhook URL is dialled by the
 * workers. The API answers them as 422, CONFIG_FILE refuses to start on them.
 */
export function permissionProblems(permissions: Permissions): string[] {
  const problems: string[] = [];
  for (const side of ['fromAccountOverride', 'toAccountOverride'] as const) {
    const pattern = permissions[side]?.namePattern;
    if (pattern === undefined) continue;
    const problem = namePatternProblem(pattern);
    if (problem !== undefined) problems.push(`${side}.namePattern: ${problem}`);
  }
  const webhookUrl = permissions.webhook?.url;
  const urlProblem = webhookUrl === undefined ? undefined : webhookUrlProblem(webhookUrl);
  if (urlProblem !== undefined) problems.push(`webhook.url: ${urlProblem}`);
  return problems;
}

export function checkPermissions(permissions: Permissions): void {
  const [problem] = permissionProblems(permissions);
  if (problem !== undefined) throw apiError('VALIDATION_ERROR', `body.permissions.${problem}`);
}

/**
 * The permissions a write leaves stored (a merge patch's result included) must be a whole,
 * valid Permissions object; in production a key that can create intents must also say how it signs
 * (docs/rules.md R60).
 */
export function checkStoredPermissions(permissions: unknown, production: boolean): void {
  if (!Value.Check(Permissions, permissions)) {
    const [error] = Value.Errors(Permissions, permissions);
    throw apiError(
      'VALIDATION_ERROR',
      `body.permissions${error?.instancePath.replaceAll('/', '.') ?? ''}: after the merge ${error?.message ?? 'is invalid'}`,
    );
  }
  checkPermissions(permissions);
  if (production && signingUnstated(permissions)) {
    throw apiError(
      'VALIDATION_ERROR',
      'body.permissions.requireMessageSignatures: a key that can create intents must set it (true or false) in production',
    );
  }
}

/** docs/rules.md R60: whether the legacy X-Signature, which does not cover X-User-Id, verifies for this key is said, not assumed. */
export const signingUnstated = (permissions: Permissions): boolean =>
  permissions.allowedOperationTypes.length > 0 && permissions.requireMessageSignatures === undefined;
