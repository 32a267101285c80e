import type { App } from '../../typed-app.js';
import Type from 'typebox';
import type { Database } from '../../../adapters/database.js';
import { runAudit } from '../../../domain/audit/audit.js';
import { responses } from '../../schemas/shared.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import { AuditResponse } from '../../schemas/admin.js';

const AuditQuery = Type.Object(
  {
    since: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'only intents updated since then get the per-intent checks; ledger-wide checks always run',
      }),
    ),
  },
  { additionalProperties: false },
);

/**
 * GET /admin/audit: the invariant audit on one consistent snapshot. A broken invariant is a
 * finding, not a failed request, so the answer is 200 with ok false; a monitor alerts on `ok`.
 */
export function adminAuditRoutes(app: App, deps: { readonly db: Database }): void {
  app.get(
    '/admin/audit',
    {
      config: { auth: 'admin' },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        operationId: 'runAudit',
        summary: 'Check the money and audit-trail invariants between the ledger and the intents',
        querystring: AuditQuery,
        response: responses({ 200: AuditResponse }, []),
      },
    },
    async (request) => {
      const { since } = request.query;
      const result = await runAudit(deps.db, since === undefined ? {} : { since: new Date(since) });
      if (!result.ok) request.log.error({ violations: result.violations.length }, 'invariant audit found violations');
      return result;
    },
  );
}
