import type { App } from '../../typed-app.js';
import type { Database } from '../../../adapters/database.js';
import { AuthPolicy, AuthPolicyInputs, authPolicies } from '../../../domain/rules/auth-policies.js';
import { checkFeeExpression } from '../../../domain/rules/fee-expression-check.js';
import { FeeRule, FeeRuleInputs, feeRules } from '../../../domain/rules/fee-rules.js';
import { LimitRule, LimitRuleInputs, limitRules } from '../../../domain/rules/limit-rules.js';
import { checkRoute, Route, RouteInputs, routes } from '../../../domain/rules/route-rules.js';
import {
  checkPermissions,
  checkStoredPermissions,
  type Permissions,
  ServiceIdParams,
  ServiceKey,
  ServiceKeyInputs,
  serviceKeys,
} from '../../../domain/auth/service-keys.js';
import { createFeeEngine, type FeeEngine } from '../../../domain/rules/fees/index.js';
import { crudRoutes } from './crud.js';
import { IdParams } from '../../schemas/admin.js';
import { adminSystemRoutes, type ReloadSecrets } from './system.js';
import { adminWebhookRoutes } from './webhooks.js';

export interface AdminDeps {
  readonly db: Database;
  /** The engine that calculates fees, so a rule is checked under the same limits; one is made when absent. */
  readonly feeEngine?: FeeEngine | undefined;
  readonly reloadSecrets?: ReloadSecrets | undefined;
  /** NODE_ENV=production: a key that can create intents must say how it signs (docs/rules.md R60). */
  readonly production?: boolean;
}

/** Every `/admin/*` route: signed key with `admin`, or the admin bearer token (docs/rules.md R11). */
export async function adminRoutes(app: App, deps: AdminDeps): Promise<void> {
  const { db } = deps;
  let feeEngine = deps.feeEngine;
  if (feeEngine === undefined) {
    const own = await createFeeEngine();
    app.addHook('onClose', async () => own.dispose());
    feeEngine = own;
  }
  const engine = feeEngine;

  crudRoutes(app, db, {
    path: '/admin/fee-rules',
    noun: 'fee rule',
    listKey: 'feeRules',
    operationNoun: 'FeeRule',
    entity: feeRules,
    record: FeeRule,
    bodies: FeeRuleInputs,
    keyParam: 'id',
    params: IdParams,
    // Turning a broken rule off must stay possible; anything that leaves it active, or a new
    // expression, is checked.
    checkRecord: async (rule, input) => {
      if (rule.active || input.expression !== undefined) await checkFeeExpression(engine, rule);
    },
  });
  crudRoutes(app, db, {
    path: '/admin/routes',
    noun: 'route',
    listKey: 'routes',
    operationNoun: 'Route',
    entity: routes,
    record: Route,
    bodies: RouteInputs,
    keyParam: 'id',
    params: IdParams,
    checkRecord: checkRoute,
  });
  crudRoutes(app, db, {
    path: '/admin/limit-rules',
    noun: 'limit rule',
    listKey: 'limitRules',
    operationNoun: 'LimitRule',
    entity: limitRules,
    record: LimitRule,
    bodies: LimitRuleInputs,
    keyParam: 'id',
    params: IdParams,
  });
  crudRoutes(app, db, {
    path: '/admin/auth-policies',
    noun: 'auth policy',
    listKey: 'authPolicies',
    operationNoun: 'AuthPolicy',
    entity: authPolicies,
    record: AuthPolicy,
    bodies: AuthPolicyInputs,
    keyParam: 'id',
    params: IdParams,
  });
  crudRoutes(app, db, {
    path: '/admin/service-keys',
    noun: 'service key',
    listKey: 'serviceKeys',
    operationNoun: 'ServiceKey',
    entity: serviceKeys,
    record: ServiceKey,
    bodies: ServiceKeyInputs,
    keyParam: 'serviceId',
    params: ServiceIdParams,
    checkInput: (input) => {
      if (input.permissions !== undefined) checkPermissions(input.permissions as Permissions);
    },
    // The permissions as stored after a merge patch, whole: the patch alone may be valid and its result not.
    checkRecord: (key) => checkStoredPermissions(key.permissions, deps.production === true),
  });
  adminSystemRoutes(app, { db, reloadSecrets: deps.reloadSecrets });
  adminWebhookRoutes(app, db);
}
