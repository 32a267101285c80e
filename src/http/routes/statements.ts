import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import Type from 'typebox';
import type { Database } from '../../adapters/database.js';
import { AccountName } from '../../domain/wire-types.js';
import { camt053Statement, csvStatement, STATEMENT_FORMATS } from '../../domain/statements/formats.js';
import { statementHeader, statementPages, statementJson, statementRange, untilFinal } from '../../domain/statements/statements.js';
import { InstantText, Statement } from '../schemas/statements.js';
import { ADMIN_SECURITY } from '../plugins/openapi-security.js';
import { responses } from '../schemas/shared.js';
import type { App } from '../typed-app.js';

const STATEMENT_DESCRIPTION =
  'The postings stamped in [from, to), in posting order, each with the balance after it; openingBalance is the balance ' +
  'of the postings stamped before from, closingBalance before to, so a statement ending at t chains into the one starting ' +
  'at t (docs/rules.md R58). format=json answers at most 10,000 entries (more: 422 naming csv); csv (text/csv) and ' +
  'camt053 (ISO 20022 camt.053.001.08, application/xml) stream any length. A to less than 5 s ago is waited for.';

const CONTENT_TYPES = { csv: 'text/csv; charset=utf-8', camt053: 'application/xml; charset=utf-8' } as const;

/**
 * GET /accounts/{name}/statement, signed by a service key, and the same at
 * /admin/accounts/{name}/statement with the admin token, for the console's statement view.
 */
export function statementRoutes(app: App, deps: { db: Database }) {
  statementRoute(app, deps, {
    path: '/accounts/:name/statement',
    operationId: 'getAccountStatement',
    tags: ['accounts'],
    admin: false,
  });
  statementRoute(app, deps, {
    path: '/admin/accounts/:name/statement',
    operationId: 'getAdminAccountStatement',
    tags: ['admin'],
    admin: true,
  });
}

function statementRoute(app: App, deps: { db: Database }, route: { path: string; operationId: string; tags: string[]; admin: boolean }) {
  const { db } = deps;
  app.get(
    route.path,
    {
      ...(route.admin ? { config: { auth: 'admin' as const } } : {}),
      schema: {
        tags: route.tags,
        ...(route.admin ? { security: ADMIN_SECURITY } : {}),
        operationId: route.operationId,
        summary: 'Statement of an account a user owns over [from, to): json, csv or camt.053',
        description: STATEMENT_DESCRIPTION,
        params: Type.Object({ name: AccountName }),
        querystring: Type.Object(
          {
            from: InstantText,
            to: InstantText,
            format: Type.Optional(Type.Enum(STATEMENT_FORMATS, { description: 'default json' })),
          },
          { additionalProperties: false },
        ),
        response: responses(
          {
            200: {
              description: 'the statement',
              content: {
                'application/json': { schema: Statement },
                'text/csv': { schema: Type.String() },
                'application/xml': { schema: Type.String() },
              },
            },
          },
          ['NOT_FOUND', 'VALIDATION_ERROR'],
        ),
      },
    },
    async (request, reply) => {
      const { name } = request.params;
      const { from, to, format = 'json' } = request.query;
      const range = await statementRange(db, name, from, to);
      if (format === 'json') return statementJson(db, range);
      await untilFinal(range.waitMs);
      const header = await statementHeader(db, range);
      const pages = statementPages(db, range);
      const body =
        format === 'csv' ? csvStatement(pages) : camt053Statement(header, pages, { messageId: randomUUID(), createdAt: new Date() });
      const extension = format === 'csv' ? 'csv' : 'xml';
      // The schema's types cover the json body; a stream is Fastify's own kind of payload.
      const streamed: FastifyReply = reply;
      streamed
        .header('content-type', CONTENT_TYPES[format])
        .header('content-disposition', `attachment; filename="statement-${encodeURIComponent(header.accountName)}.${extension}"`);
      // Readable.from pulls the next chunk only when the socket drains: the database is read at
      // the pace the client reads.
      return streamed.send(Readable.from(body));
    },
  );
}
