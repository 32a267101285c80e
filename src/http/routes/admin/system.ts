import type { App } from '../../typed-app.js';
import type { Database } from '../../../adapters/database.js';
import { recordChange } from '../../../domain/admin/change-log.js';
import { apiError } from '../../../domain/errors.js';
import { responses } from '../../schemas/shared.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import { LogLevelBody, LogLevelResponse, ReloadResponse } from '../../schemas/admin.js';

/** Re-reads CONFIG_FILE's secrets into memory; returns the number of services with a secret. Throws when the file is unusable. */
export type ReloadSecrets = () => Promise<number> | number;

export interface AdminSystemDeps {
  readonly db: Database;
  /** Absent where the process has no CONFIG_FILE to re-read: the route then answers 503. */
  readonly reloadSecrets: ReloadSecrets | undefined;
}

/** When the logger is disabled (tests) pino reports no level. */
const currentLevel = (app: App): string => (typeof app.log.level === 'string' ? app.log.level : 'silent');

const config = { auth: 'admin' as const };
const tags = ['admin'];

export function adminSystemRoutes(app: App, deps: AdminSystemDeps): void {
  reloadRoute(app, deps);
  logLevelRoutes(app, deps.db);
}

function reloadRoute(app: App, deps: AdminSystemDeps): void {
  const { db, reloadSecrets } = deps;
  app.post(
    '/admin/config/reload',
    {
      config,
      schema: {
        tags,
        security: ADMIN_SECURITY,
        operationId: 'reloadConfig',
        summary: 'Re-read the service secrets from CONFIG_FILE (as SIGHUP does): rotation without a restart',
        response: responses({ 200: ReloadResponse }, ['INTERNAL_ERROR', 'SERVICE_UNAVAILABLE']),
      },
    },
    async (request) => {
      if (reloadSecrets === undefined) throw apiError('SERVICE_UNAVAILABLE', 'this process has no secrets reload');
      const services = await db.transaction(async (tx) => {
        let count: number;
        try {
          count = await reloadSecrets();
        } catch (error) {
          // The file's text can appear in a parse error; it holds secrets, so it stays in the log.
          request.log.error({ err: error }, 'secrets reload failed; the previous secrets stay in force');
          throw apiError('INTERNAL_ERROR', 'secrets reload failed; the previous secrets stay in force (see the service log)');
        }
        // Only the count is recorded: secrets never reach the database.
        await recordChange(tx, {
          actor: request.caller.serviceId,
          entity: 'config',
          entityId: 'secrets',
          action: 'reload',
          before: null,
          after: { services: count },
        });
        return count;
      });
      request.log.info({ services }, 'secrets reloaded');
      return { services };
    },
  );
}

function logLevelRoutes(app: App, db: Database): void {
  app.get(
    '/admin/log-level',
    {
      config,
      schema: {
        tags,
        security: ADMIN_SECURITY,
        operationId: 'getLogLevel',
        summary: 'The current log level',
        response: responses({ 200: LogLevelResponse }, []),
      },
    },
    async () => ({ level: currentLevel(app) }),
  );

  app.put(
    '/admin/log-level',
    {
      config,
      schema: {
        tags,
        security: ADMIN_SECURITY,
        operationId: 'setLogLevel',
        summary: 'Switch the log level of the running process (not kept across a restart: LOG_LEVEL is)',
        body: LogLevelBody,
        response: responses({ 200: LogLevelResponse }, []),
      },
    },
    async (request) => {
      const { level } = request.body;
      const previous = currentLevel(app);
      await db.transaction((tx) =>
        recordChange(tx, {
          actor: request.caller.serviceId,
          entity: 'log-level',
          entityId: null,
          action: 'log-level',
          before: { level: previous },
          after: { level },
        }),
      );
      // Set after the record commits: a switch that cannot be recorded does not happen.
      app.log.level = level;
      request.log.info({ level, previous }, 'log level switched');
      return { level, previous };
    },
  );
}
