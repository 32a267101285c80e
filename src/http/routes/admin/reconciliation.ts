import Type from 'typebox';
import { responses, Uuid } from '../../schemas/shared.js';
import { ReconciliationRun, ReconciliationRunSummary, StatementDate } from '../../schemas/reconciliation.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import type { App } from '../../typed-app.js';
import { apiError } from '../../../domain/errors.js';
import { BREAKS_PAGE_SIZE_MAX, listRuns, RUNS_PAGE_SIZE_MAX, readRun } from '../../../domain/reconciliation/run-store.js';
import { runStatementReconciliation, type StatementRunDeps } from '../../../domain/reconciliation/statement-run.js';

/**
 * Reconciliation with the provider (docs/rules.md R59): the admin token, or a key with admin or
 * forceResolve, the same callers as the resolve its runs may do.
 */
export function adminReconciliationRoutes(app: App, deps: StatementRunDeps): void {
  app.post(
    '/admin/reconciliation/runs',
    {
      config: { auth: 'resolve' as const },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        operationId: 'createReconciliationRun',
        summary: "Reconcile the provider's statement of a closed day against the PSPX payouts of that settlement date",
        body: Type.Object({ date: StatementDate }, { additionalProperties: false }),
        response: responses({ 201: ReconciliationRun }, ['CONFLICT', 'PSPX_STATEMENT_INVALID', 'PSPX_UNAVAILABLE']),
      },
    },
    async (request, reply) => {
      const run = await runStatementReconciliation(
        { ...deps, log: request.log },
        { date: request.body.date, requestedBy: request.caller.serviceId },
      );
      return reply.status(201).send(run);
    },
  );

  app.get(
    '/admin/reconciliation/runs',
    {
      config: { auth: 'resolve' as const },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        operationId: 'listReconciliationRuns',
        summary: 'The latest reconciliation runs, newest first',
        querystring: Type.Object(
          {
            date: Type.Optional(StatementDate),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: RUNS_PAGE_SIZE_MAX, default: 20 })),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: Type.Object({ runs: Type.Immutable(Type.Array(ReconciliationRunSummary)) }) }, []),
      },
    },
    async (request) => ({ runs: await listRuns(deps.db, request.query) }),
  );

  app.get(
    '/admin/reconciliation/runs/:runId',
    {
      config: { auth: 'resolve' as const },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        operationId: 'getReconciliationRun',
        summary: 'One reconciliation run with a page of its breaks',
        params: Type.Object({ runId: Uuid }),
        querystring: Type.Object(
          {
            after: Type.Optional(Type.String({ pattern: '^[0-9]{1,18}$', description: 'nextBreaksAfter of the previous page' })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: BREAKS_PAGE_SIZE_MAX, default: BREAKS_PAGE_SIZE_MAX })),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: ReconciliationRun }, ['NOT_FOUND']),
      },
    },
    async (request) => {
      const run = await readRun(deps.db, request.params.runId, request.query);
      if (run === null) throw apiError('NOT_FOUND', 'reconciliation run not found');
      return run;
    },
  );
}
