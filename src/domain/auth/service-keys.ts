import Type, { type Static } from 'typebox';
import { apiError } from '../errors.js';
import { ACCOUNT_TYPES, ENTITY_TYPES } from '../model.js';
import { WEBHOOK_URL_LENGTH_MAX, webhookUrlProblem } from '../events/webhooks/webhook-url.js';
import { type AdminEntity, read } from '../admin/admin-entity.js';
import { ActiveField, Timestamp } from '../admin/record-schema.js';

const AccountOverride = Type.Object(
  { allowedTypes: Type.Array(Type.Enum(ACCOUNT_TYPES)), namePattern: Type.String() },
  { additionalProperties: false },
);

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
    rateLimit: Type.Optional(
      Type.Object(
        {
          requestsPerSecond: Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000 }),
          burst: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
        },
        { additionalProperties: false },
      ),
    ),
    /** Where this service's events are POSTed, signed with its secret (docs/OPERATIONS.md, Webhooks). */
    webhook: Type.Optional(
      Type.Object(
        {
          url: Type.String({
            minLength: 1,
            maxLength: WEBHOOK_URL_LENGTH_MAX,
            description: 'http or https, no credentials, the host written as dialled (docs/SECURITY.md, Webhook URLs)',
          }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type Permissions = Static<typeof Permissions>;

const ServiceId = Type.String({ minLength: 1, maxLength: 50, pattern: '^[A-Za-z0-9._-]+$' });
export const ServiceIdParams = Type.Object({ serviceId: ServiceId });

/** The secret is set in CONFIG_FILE and loaded by a reload, never through the API or the database. */
export const ServiceKeyInputs = {
  /** Also a CONFIG_FILE `serviceKeys` entry. */
  create: Type.Object(
    { serviceId: ServiceId, permissions: Permissions, active: Type.Optional(ActiveField) },
    { additionalProperties: false, description: 'the secret is set in CONFIG_FILE and loaded by a reload, never here' },
  ),
  patch: Type.Object(
    { permissions: Type.Optional(Permissions), active: Type.Optional(ActiveField) },
    { additionalProperties: false, minProperties: 1, description: 'permissions replace the stored object as a whole' },
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
    try {
      new RegExp(pattern);
    } catch {
      problems.push(`${side}.namePattern: is not a regular expression`);
    }
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
