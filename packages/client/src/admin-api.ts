import { queryString, type Requester } from './requester.js';
import type {
  DeadWebhook,
  DeadWebhookQuery,
  WebhookRedelivery,
  AdminIntent,
  AdminIntentPage,
  AdminIntentQuery,
  AdminListQuery,
  AuditResult,
  IntentEvent,
  AuthPolicy,
  AuthPolicyInput,
  FeeDryRunRequest,
  FeeDryRunResult,
  FeeRule,
  FeeRuleInput,
  LimitRule,
  LimitRuleInput,
  LogLevel,
  ReconciliationRun,
  ReconciliationRunSummary,
  ResolveRequest,
  ResolveResult,
  Route,
  RouteInput,
  ServiceKey,
  ServiceKeyInput,
  ServiceKeyPatch,
} from './types.js';

/** One admin-managed table: list, create, read, change, deactivate (records are never deleted). */
export interface AdminCollection<Rec, Create, Patch, Key extends string | number, ListKey extends string> {
  list(query?: AdminListQuery): Promise<{ readonly [K in ListKey]: readonly Rec[] }>;
  create(body: Create): Promise<Rec>;
  get(key: Key): Promise<Rec>;
  update(key: Key, patch: Patch): Promise<Rec>;
  deactivate(key: Key): Promise<Rec>;
}

export interface AdminApi {
  /** Needs `forceResolve` or `admin` on the key (docs/rules.md R11). */
  resolve(intentId: string, body: ResolveRequest): Promise<ResolveResult>;
  /** Reconciliation with the provider (docs/rules.md R59); the same callers as resolve. */
  reconciliation: {
    /** Reconciles the provider's statement of `date` (YYYYMMDD); 409 while the provider has not closed it. */
    run(date: string): Promise<ReconciliationRun>;
    list(query?: { readonly date?: string; readonly limit?: number }): Promise<{ readonly runs: readonly ReconciliationRunSummary[] }>;
    get(runId: string, query?: { readonly after?: string; readonly limit?: number }): Promise<ReconciliationRun>;
  };
  feeRules: AdminCollection<FeeRule, FeeRuleInput, Partial<FeeRuleInput>, number, 'feeRules'> & {
    dryRun(body: FeeDryRunRequest): Promise<FeeDryRunResult>;
  };
  routes: AdminCollection<Route, RouteInput, Partial<RouteInput>, number, 'routes'>;
  limitRules: AdminCollection<LimitRule, LimitRuleInput, Partial<LimitRuleInput>, number, 'limitRules'>;
  authPolicies: AdminCollection<AuthPolicy, AuthPolicyInput, Partial<AuthPolicyInput>, number, 'authPolicies'>;
  serviceKeys: AdminCollection<ServiceKey, ServiceKeyInput, ServiceKeyPatch, string, 'serviceKeys'>;
  /** Every service's intents, newest first, a page at a time. */
  intents: {
    list(query?: AdminIntentQuery): Promise<AdminIntentPage>;
    get(intentId: string): Promise<AdminIntent & { readonly events: readonly IntentEvent[] }>;
  };
  /** The invariant audit; `since` (ISO 8601) limits the per-intent checks to intents updated since then. */
  audit(query?: { readonly since?: string }): Promise<AuditResult>;
  /** Re-reads the service secrets from CONFIG_FILE, as SIGHUP does. */
  reloadConfig(): Promise<{ readonly services: number }>;
  logLevel: { get(): Promise<LogLevel>; set(level: string): Promise<LogLevel> };
  /** Webhook deliveries that are dead after the retry window, and their redelivery. */
  webhooks: {
    dead(query?: DeadWebhookQuery): Promise<{ readonly deadWebhooks: readonly DeadWebhook[] }>;
    redeliver(cursor: string): Promise<WebhookRedelivery>;
  };
}

/** The admin-managed records' routes; the CLI's admin commands name them the same way. */
export const ADMIN_COLLECTION_PATHS = {
  'fee-rules': '/admin/fee-rules',
  routes: '/admin/routes',
  'limit-rules': '/admin/limit-rules',
  'auth-policies': '/admin/auth-policies',
  'service-keys': '/admin/service-keys',
} as const;

function collection<Rec, Create, Patch, Key extends string | number, ListKey extends string>(
  call: Requester,
  path: string,
): AdminCollection<Rec, Create, Patch, Key, ListKey> {
  const item = (key: Key) => `${path}/${encodeURIComponent(String(key))}`;
  return {
    list: (query = {}) => call({ method: 'GET', path: `${path}${queryString({ ...query })}`, retry: true }),
    // A create repeated after a lost answer would make a second record: never retried.
    create: (body) => call({ method: 'POST', path, json: body, retry: false }),
    get: (key) => call({ method: 'GET', path: item(key), retry: true }),
    // The same PATCH twice leaves the same record; so does a second deactivate.
    update: (key, patch) => call({ method: 'PATCH', path: item(key), json: patch, retry: true }),
    deactivate: (key) => call({ method: 'DELETE', path: item(key), retry: true }),
  };
}

export function adminApi(call: Requester): AdminApi {
  return {
    // A repeated resolve finds SETTLED or FAILED and answers 200 with previousStatus, without side effect.
    resolve: (intentId, body) =>
      call({ method: 'POST', path: `/admin/intents/${encodeURIComponent(intentId)}/resolve`, json: body, retry: true }),
    reconciliation: {
      // Running a date again answers the same breaks: a retry after a lost answer is harmless.
      run: (date) => call({ method: 'POST', path: '/admin/reconciliation/runs', json: { date }, retry: true }),
      list: (query = {}) => call({ method: 'GET', path: `/admin/reconciliation/runs${queryString({ ...query })}`, retry: true }),
      get: (runId, query = {}) =>
        call({ method: 'GET', path: `/admin/reconciliation/runs/${encodeURIComponent(runId)}${queryString({ ...query })}`, retry: true }),
    },
    feeRules: {
      ...collection(call, ADMIN_COLLECTION_PATHS['fee-rules']),
      dryRun: (body) => call({ method: 'POST', path: '/admin/fee-rules/dry-run', json: body, retry: true }),
    },
    routes: collection(call, ADMIN_COLLECTION_PATHS.routes),
    limitRules: collection(call, ADMIN_COLLECTION_PATHS['limit-rules']),
    authPolicies: collection(call, ADMIN_COLLECTION_PATHS['auth-policies']),
    serviceKeys: collection(call, ADMIN_COLLECTION_PATHS['service-keys']),
    intents: {
      list: (query = {}) => call({ method: 'GET', path: `/admin/intents${queryString({ ...query })}`, retry: true }),
      get: (intentId) => call({ method: 'GET', path: `/admin/intents/${encodeURIComponent(intentId)}`, retry: true }),
    },
    audit: (query = {}) => call({ method: 'GET', path: `/admin/audit${queryString({ ...query })}`, retry: true }),
    reloadConfig: () => call({ method: 'POST', path: '/admin/config/reload', retry: true }),
    logLevel: {
      get: () => call({ method: 'GET', path: '/admin/log-level', retry: true }),
      set: (level) => call({ method: 'PUT', path: '/admin/log-level', json: { level }, retry: true }),
    },
    webhooks: {
      dead: (query = {}) => call({ method: 'GET', path: `/admin/webhooks/dead${queryString({ ...query })}`, retry: true }),
      // Harmless to repeat, but a repeat after a lost answer would report 409 or 404 for a redelivery that happened.
      redeliver: (cursor) => call({ method: 'POST', path: `/admin/webhooks/dead/${encodeURIComponent(cursor)}/redeliver`, retry: false }),
    },
  };
}
