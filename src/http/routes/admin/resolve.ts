import type { App } from '../../typed-app.js';
import Type from 'typebox';
import { type ResolveDeps, resolveIntent } from '../../../domain/intents/money/resolve-intent.js';
import { responses, Uuid } from '../../schemas/shared.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import { ResolveBody, ResolveResponse } from '../../schemas/admin.js';

/**
 * POST /admin/intents/{id}/resolve: an operator's decision on a payout in MANUAL_REVIEW. Auth
 * mode `resolve`: a signed key with forceResolve or admin, or the admin bearer token (docs/rules.md R11).
 */
export function adminResolveRoutes(app: App, deps: ResolveDeps): void {
  app.post(
    '/admin/intents/:id/resolve',
    {
      config: { auth: 'resolve' as const },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        operationId: 'resolveIntent',
        summary:
          'Resolve an intent in MANUAL_REVIEW: CONFIRMED queues its settlement, FAILED fails it and queues the release of its reservation',
        params: Type.Object({ id: Uuid }),
        body: ResolveBody,
        response: responses({ 200: ResolveResponse }, ['NOT_FOUND', 'CONFLICT', 'WRONG_STATUS']),
      },
    },
    async (request) => {
      const { id } = request.params;
      const body = request.body;
      return resolveIntent(deps, {
        intentId: id,
        resolution: body.resolution,
        reason: body.reason,
        actor: request.caller.serviceId,
        log: request.log,
      });
    },
  );
}
