import type { FastifyInstance } from 'fastify';
import type { Database } from '../../adapters/database.js';
import { authPolicies } from '../../domain/admin/auth-policies.js';
import { checkFeeExpression } from '../../domain/admin/fee-expression-check.js';
import { feeRules } from '../../domain/admin/fee-rules.js';
import { limitRules } from '../../domain/admin/limit-rules.js';
import { checkRoute, routes } from '../../domain/admin/routes.js';
import { checkPermissions, serviceKeys } from '../../domain/admin/service-keys.js';
import type { Permissions } from '../../config.js';
import { createFeeEngine, type FeeEngine } from '../../domain/fees/index.js';
import { crudRoutes } from './admin-crud.js';
import {
  AuthPolicy,
  AuthPolicyBodies,
  FeeRule,
  FeeRuleBodies,
  IdParams,
  LimitRule,
  LimitRuleBodies,
  Route,
  RouteBodies,
  ServiceIdParams,
  ServiceKey,
  ServiceKeyBodies,
} from './admin-schemas.js';
import { adminSystemRoutes, type ReloadSecrets } from './admin-system.js';

export interface AdminDeps {
  readonly db: Database;
  /** The engine that calculates fees, so a rule is checked under the same limits; one is made when absent. */
  readonly feeEngine?: FeeEngine | undefined;
  readonly reloadSecrets?: ReloadSecrets | undefined;
}

/** Every `/admin/*` route: signed key with `admin`, or the admin bearer token (docs/rules.md R11). */
export async function adminRoutes(app: FastifyInstance, deps: AdminDeps): Promise<void> {
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
    entity: feeRules,
    record: FeeRule,
    bodies: FeeRuleBodies,
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
    entity: routes,
    record: Route,
    bodies: RouteBodies,
    keyParam: 'id',
    params: IdParams,
    checkRecord: checkRoute,
  });
  crudRoutes(app, db, {
    path: '/admin/limit-rules',
    noun: 'limit rule',
    listKey: 'limitRules',
    entity: limitRules,
    record: LimitRule,
    bodies: LimitRuleBodies,
    keyParam: 'id',
    params: IdParams,
  });
  crudRoutes(app, db, {
    path: '/admin/auth-policies',
    noun: 'auth policy',
    listKey: 'authPolicies',
    entity: authPolicies,
    record: AuthPolicy,
    bodies: AuthPolicyBodies,
    keyParam: 'id',
    params: IdParams,
  });
  crudRoutes(app, db, {
    path: '/admin/service-keys',
    noun: 'service key',
    listKey: 'serviceKeys',
    entity: serviceKeys,
    record: ServiceKey,
    bodies: ServiceKeyBodies,
    keyParam: 'serviceId',
    params: ServiceIdParams,
    checkInput: (input) => {
      if (input.permissions !== undefined) checkPermissions(input.permissions as Permissions);
    },
  });
  adminSystemRoutes(app, { db, reloadSecrets: deps.reloadSecrets });
}
