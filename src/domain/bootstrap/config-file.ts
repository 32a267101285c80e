import Type, { type Static } from 'typebox';
import { channelCarries } from '../channels/channels.js';
import { permissionProblems, ServiceKeyInputs } from '../auth/service-keys.js';
import { AuthPolicyInputs } from '../rules/auth-policies.js';
import { FeeRuleInputs } from '../rules/fee-rules.js';
import { LimitRuleInputs } from '../rules/limit-rules.js';
import { RouteInputs } from '../rules/route-rules.js';
import { ACCOUNT_TYPES } from '../model.js';
import { AccountName } from '../wire-types.js';

/** CONFIG_FILE: the records the service starts with, each in the shape the admin API takes it. */
export const ConfigFileSchema = Type.Object(
  {
    secrets: Type.Record(
      Type.String({ minLength: 1, maxLength: 50 }),
      Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })]),
    ),
    serviceKeys: Type.Array(ServiceKeyInputs.create),
    routes: Type.Optional(Type.Array(RouteInputs.create)),
    feeRules: Type.Optional(Type.Array(FeeRuleInputs.create)),
    limitRules: Type.Optional(Type.Array(LimitRuleInputs.create)),
    authPolicies: Type.Optional(Type.Array(AuthPolicyInputs.create)),
    accounts: Type.Optional(
      Type.Array(
        Type.Object(
          {
            accountName: AccountName,
            accountType: Type.Enum(ACCOUNT_TYPES),
            userId: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
          },
          { additionalProperties: false },
        ),
      ),
    ),
  },
  { additionalProperties: false },
);
export type ConfigFile = Static<typeof ConfigFileSchema>;

/**
 * What the shape cannot say about a config file, as one line per fault naming its place: a route
 * to a channel that cannot carry its type, a key whose permissions the admin API would refuse.
 * The start stops on the first one (main.ts), as it does on a wrong shape.
 */
export function configFileProblems(file: ConfigFile): string[] {
  const problems: string[] = [];
  for (const [index, route] of (file.routes ?? []).entries()) {
    if (!channelCarries(route.channel, route.operationType)) {
      problems.push(`routes[${index}] sends ${route.operationType} to ${route.channel}, which cannot carry it`);
    }
  }
  for (const key of file.serviceKeys) {
    for (const problem of permissionProblems(key.permissions)) problems.push(`${key.serviceId} permissions.${problem}`);
  }
  return problems;
}
