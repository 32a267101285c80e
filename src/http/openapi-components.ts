import { isDeepStrictEqual } from 'node:util';
import type { TSchema } from 'typebox';
import { WalletCustomer } from '../adapters/pspx/pspx-client.js';
import { AuthPolicy, AuthPolicyInputs } from '../domain/rules/auth-policies.js';
import { FeeRule, FeeRuleInputs } from '../domain/rules/fee-rules.js';
import { LimitRule, LimitRuleInputs } from '../domain/rules/limit-rules.js';
import { Route, RouteInputs } from '../domain/rules/route-rules.js';
import { Permissions, ServiceKey, ServiceKeyInputs } from '../domain/auth/service-keys.js';
import { IntentBody, QuoteBody } from '../domain/intents/create/intent-request.js';
import { ChannelSchema, IntentStatusSchema, Money, OperationTypeSchema } from '../domain/wire-types.js';
import { Account, Balance, CreateAccountBody, EntityAccount, EntityAccounts, Registration, Transactions } from './schemas/accounts.js';
import {
  AdminAccount,
  AdminIntent,
  AdminIntentPage,
  AdminRefunds,
  AuditResponse,
  ConsoleStatus,
  ResolveBody,
  ResolveResponse,
} from './schemas/admin.js';
import { HealthKo, HealthOk } from './schemas/health.js';
import { FeeSplit, IntentCreated, IntentEvents, IntentEventView, IntentView, Quote } from './schemas/intents.js';
import { CancelBody, CancelResult, ConfirmBody, ConfirmResult } from './schemas/invoices.js';
import { EvaluateBody, EvaluateResponse } from './schemas/policies.js';
import { ErrorResponse, HistoryEntry } from './schemas/shared.js';
import { ReconciliationBreak, ReconciliationRun, ReconciliationRunSummary } from './schemas/reconciliation.js';
import { Statement, StatementEntry } from './schemas/statements.js';
import { RefundBody } from '../domain/refunds/refund-request.js';
import { RefundList, RefundView } from '../domain/refunds/refund-store.js';

/**
 * The shapes the OpenAPI document names under components.schemas, by the names of the client's
 * types where it has one. The shapes live in schemas/ by concept (and the records' with their
 * record in domain/), so this list names no route; the document refers to a component wherever
 * a route's schema holds one of these shapes (plugins/openapi.ts).
 */
export const COMPONENT_SCHEMAS: Readonly<Record<string, TSchema>> = {
  Error: ErrorResponse,
  IntentStatus: IntentStatusSchema,
  OperationType: OperationTypeSchema,
  Channel: ChannelSchema,
  Money,
  IntentCreateRequest: IntentBody,
  IntentCreated,
  Intent: IntentView,
  IntentEvent: IntentEventView,
  IntentEvents,
  QuoteRequest: QuoteBody,
  FeeSplit,
  Quote,
  ConfirmRequest: ConfirmBody,
  ConfirmResult,
  CancelRequest: CancelBody,
  CancelResult,
  RefundCreateRequest: RefundBody,
  Refund: RefundView,
  Refunds: RefundList,
  AccountCreateRequest: CreateAccountBody,
  Account,
  EntityAccount,
  EntityAccounts,
  Balance,
  Transaction: HistoryEntry,
  Transactions,
  Statement,
  StatementEntry,
  ReconciliationBreak,
  ReconciliationRunSummary,
  ReconciliationRun,
  IppsRegistrationRequest: WalletCustomer,
  IppsRegistration: Registration,
  PolicyEvaluationRequest: EvaluateBody,
  PolicyDecision: EvaluateResponse,
  HealthOk,
  HealthKo,
  AdminIntent,
  AdminIntentPage,
  AdminRefunds,
  ConsoleStatus,
  AdminAccount,
  ResolveRequest: ResolveBody,
  ResolveResult: ResolveResponse,
  AuditResult: AuditResponse,
  FeeRule,
  FeeRuleInput: FeeRuleInputs.create,
  FeeRulePatch: FeeRuleInputs.patch,
  Route,
  RouteInput: RouteInputs.create,
  RoutePatch: RouteInputs.patch,
  LimitRule,
  LimitRuleInput: LimitRuleInputs.create,
  LimitRulePatch: LimitRuleInputs.patch,
  AuthPolicy,
  AuthPolicyInput: AuthPolicyInputs.create,
  AuthPolicyPatch: AuthPolicyInputs.patch,
  Permissions,
  ServiceKey,
  ServiceKeyInput: ServiceKeyInputs.create,
  ServiceKeyPatch: ServiceKeyInputs.patch,
};

const COMPONENTS_PATH = '#/components/schemas/';

/** A shape is the same component wherever it appears: `Type.Optional(Money)` is Money too. */
function componentNamed(node: object): string | undefined {
  return Object.keys(COMPONENT_SCHEMAS).find((name) => isDeepStrictEqual(node, COMPONENT_SCHEMAS[name]));
}

for (const [name, schema] of Object.entries(COMPONENT_SCHEMAS)) {
  const first = componentNamed(schema);
  if (first !== name) throw new Error(`OpenAPI components ${first} and ${name} have the same shape: keep one`);
}

/**
 * A copy of `node` in which every subschema that is a component's shape is a `$ref` to it;
 * `own` keeps a component's own definition from referring to itself.
 */
export function withComponentRefs(node: unknown, own?: string): unknown {
  if (Array.isArray(node)) return node.map((item) => withComponentRefs(item));
  if (typeof node !== 'object' || node === null) return node;
  const name = componentNamed(node);
  if (name !== undefined && name !== own) return { $ref: `${COMPONENTS_PATH}${name}` };
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, withComponentRefs(value)]));
}

export const componentRef = (name: keyof typeof COMPONENT_SCHEMAS) => ({ $ref: `${COMPONENTS_PATH}${name}` });

/** components.schemas of the document: each shape once, its parts by reference. */
export const documentedComponents = () =>
  Object.fromEntries(Object.entries(COMPONENT_SCHEMAS).map(([name, schema]) => [name, withComponentRefs(schema, name)]));
