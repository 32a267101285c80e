/**
 * The client package writes the wire types out by hand (it cannot depend on TypeBox or import the
 * server); the service validates with its schemas. These checks hold the two to one shape, in
 * both directions: a field added to a schema and not to the client (or the other way round)
 * fails `npm run typecheck`, which `npm test` runs before vitest. The vocabulary lists need no
 * check: the service imports them from the client package.
 */
import type * as Client from '@payorch/client';
import type { Static } from 'typebox';
import { describe, expectTypeOf, it } from 'vitest';
import type { WalletCustomer } from '../../src/adapters/pspx/pspx-client.js';
import type { AuthPolicyInputs, AuthPolicyRecord } from '../../src/domain/rules/auth-policies.js';
import type { FeeRuleInputs, FeeRuleRecord } from '../../src/domain/rules/fee-rules.js';
import type { LimitRuleInputs, LimitRuleRecord } from '../../src/domain/rules/limit-rules.js';
import type { RouteInputs, RouteRecord } from '../../src/domain/rules/route-rules.js';
import type { Permissions, ServiceKeyInput, ServiceKeyPatch, ServiceKeyRecord } from '../../src/domain/auth/service-keys.js';
import type { IntentInput, QuoteInput } from '../../src/domain/intents/create/intent-request.js';
import type { DeadWebhook, Redelivery } from '../../src/http/routes/admin/webhooks.js';

/** Readonly aside (a wire type marks fields readonly, a schema's Static does not), each side fits the other. */
type SameShape<ClientType, ServerType> = [ClientType] extends [ServerType] ? ([ServerType] extends [ClientType] ? true : false) : false;

describe('client wire types against the service schemas', () => {
  it('request bodies', () => {
    expectTypeOf<SameShape<Client.IntentInput, IntentInput>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.QuoteRequest, QuoteInput>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.IppsRegistrationRequest, WalletCustomer>>().toEqualTypeOf<true>();
  });

  it('admin records and their create and change bodies', () => {
    expectTypeOf<SameShape<Client.FeeRule, FeeRuleRecord>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.FeeRuleInput, Static<typeof FeeRuleInputs.create>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Partial<Client.FeeRuleInput>, Static<typeof FeeRuleInputs.patch>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.Route, RouteRecord>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.RouteInput, Static<typeof RouteInputs.create>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Partial<Client.RouteInput>, Static<typeof RouteInputs.patch>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.LimitRule, LimitRuleRecord>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.LimitRuleInput, Static<typeof LimitRuleInputs.create>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Partial<Client.LimitRuleInput>, Static<typeof LimitRuleInputs.patch>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.AuthPolicy, AuthPolicyRecord>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.AuthPolicyInput, Static<typeof AuthPolicyInputs.create>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Partial<Client.AuthPolicyInput>, Static<typeof AuthPolicyInputs.patch>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.Permissions, Permissions>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.DeadWebhook, Static<typeof DeadWebhook>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.WebhookRedelivery, Static<typeof Redelivery>>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.ServiceKey, ServiceKeyRecord>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.ServiceKeyInput, ServiceKeyInput>>().toEqualTypeOf<true>();
    expectTypeOf<SameShape<Client.ServiceKeyPatch, ServiceKeyPatch>>().toEqualTypeOf<true>();
  });

  it('a drifted field is caught (the check itself can fail)', () => {
    expectTypeOf<SameShape<Omit<Client.IntentInput, 'amount'>, IntentInput>>().toEqualTypeOf<false>();
    expectTypeOf<SameShape<Client.IntentInput & { surplus: string }, IntentInput>>().toEqualTypeOf<false>();
    expectTypeOf<SameShape<Client.IntentInput & { comment?: number }, IntentInput>>().toEqualTypeOf<false>();
  });
});
