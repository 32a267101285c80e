import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply } from 'fastify';
import type { App } from '../typed-app.js';
import Type from 'typebox';
import type { Database } from '../../adapters/database.js';
import type { Ledger } from '../../ledger/ledger.js';
import { apiError } from '../../domain/errors.js';
import { ALLOWED_TRANSITIONS, PSP_SUB_STATES } from '../../domain/intents/store/state-machine.js';
import { CHANNELS, FINAL_STATUSES, INTENT_STATUSES, OPERATION_TYPES } from '../../domain/model.js';
import { ConsoleStatus } from '../schemas/admin.js';
import { responses } from '../schemas/shared.js';
import { adminAccountRoutes } from './admin/accounts.js';

/** console/ at the package root: three levels up from both src/http/routes and dist/http/routes. */
const CONSOLE_DIR = fileURLToPath(new URL('../../../console/', import.meta.url));

/** The console's own files, served as they are (no build step). */
const OWN_FILES = [
  'index.html',
  'console.css',
  'favicon.svg',
  'app.js',
  'api.js',
  'html.js',
  'format.js',
  'intents.js',
  'resolve.js',
  'review.js',
  'accounts.js',
  'audit.js',
  'webhooks.js',
  'reconciliation.js',
  'refunds.js',
] as const;

/**
 * model.js, written from the domain's own tables at start, so the console's filters and badges
 * cannot drift from the service: the statuses, which of them are final, the transitions, the
 * channels and the operation types.
 */
function modelModule(): Asset {
  const constants = {
    INTENT_STATUSES,
    FINAL_STATUSES,
    ALLOWED_TRANSITIONS,
    PSP_SUB_STATES,
    CHANNELS,
    OPERATION_TYPES,
  };
  const body = Object.entries(constants)
    .map(([name, value]) => `export const ${name} = ${JSON.stringify(value)};`)
    .join('\n');
  return {
    body: Buffer.from(`// Written by the server from src/domain/model.ts and src/domain/intents/store/state-machine.ts.\n${body}\n`),
    contentType: CONTENT_TYPES['.js']!,
  };
}

/** Preact and htm, served from node_modules under flat names that console/index.html's import map points to. */
function vendorFiles(): Record<string, string> {
  const require = createRequire(import.meta.url);
  return {
    'preact.mjs': require.resolve('preact'),
    'hooks.mjs': require.resolve('preact/hooks'),
    // htm's `require` condition is CommonJS; its ES module sits beside it.
    'htm.mjs': join(dirname(require.resolve('htm')), 'htm.mjs'),
  };
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  readonly body: Buffer;
  readonly contentType: string;
}

/**
 * The page's only inline script is its import map (bare specifiers → vendor files); the CSP allows
 * exactly that text by its hash, so a script injected into the page cannot run.
 */
export function importMapHash(indexHtml: string): string {
  const inline = [...indexHtml.matchAll(/<script(?![^>]*\bsrc=)([^>]*)>([\s\S]*?)<\/script>/g)];
  assert.equal(inline.length, 1, 'console/index.html: exactly one inline script, the import map');
  const [, attributes = '', text = ''] = inline[0] ?? [];
  assert.match(attributes, /type="importmap"/, 'console/index.html: the inline script must be the import map');
  return `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
}

export function contentSecurityPolicy(indexHtml: string): string {
  return [
    "default-src 'none'",
    `script-src 'self' ${importMapHash(indexHtml)}`,
    "style-src 'self'",
    "img-src 'self'",
    // The admin API on this origin only: the token cannot be sent anywhere else.
    "connect-src 'self'",
    "base-uri 'none'",
    // The forms are handled in script; a native submit must not put what was typed into a URL.
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

async function loadAssets(): Promise<Map<string, Asset>> {
  const paths: Array<[string, string]> = [
    ...OWN_FILES.map((name): [string, string] => [name, join(CONSOLE_DIR, name)]),
    ...Object.entries(vendorFiles()),
  ];
  const assets = new Map<string, Asset>();
  for (const [name, path] of paths) {
    const contentType = CONTENT_TYPES[extname(name)];
    assert.ok(contentType !== undefined, `console asset ${name}: no content type for its extension`);
    assets.set(name, { body: await readFile(path), contentType });
  }
  assets.set('model.js', modelModule());
  return assets;
}

const FileParams = Type.Object({ file: Type.String({ minLength: 1, maxLength: 64 }) });
const html = { description: 'the console page', content: { 'text/html': { schema: Type.String() } } };
const asset = {
  description: 'a script, style sheet or icon of the console',
  content: {
    'text/javascript': { schema: Type.String() },
    'text/css': { schema: Type.String() },
    'image/svg+xml': { schema: Type.String() },
  },
};

/**
 * GET /console and its files: unsigned static assets (docs/rules.md R37); everything the page shows comes from
 * the admin API with the admin token, which the operator enters in the page. Also registers that
 * API's one console-only route, GET /admin/accounts/{name}. The files are read once at start: a
 * missing one stops the start instead of breaking the page later.
 */
export async function consoleRoutes(
  app: App,
  deps: { readonly db: Database; readonly ledger: Ledger; readonly adminTokenConfigured: boolean },
): Promise<void> {
  const assets = await loadAssets();
  const index = assets.get('index.html');
  assert.ok(index !== undefined);
  const headers = {
    'content-security-policy': contentSecurityPolicy(index.body.toString('utf8')),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    // Small files, revalidated each load, so an upgrade never pairs old scripts with a new API.
    'cache-control': 'no-cache',
  };
  const send = (reply: FastifyReply, file: Asset) => reply.headers(headers).type(file.contentType).send(file.body);

  app.get(
    '/console',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['console'],
        operationId: 'getConsole',
        summary: 'The operator console (HTML; no signature)',
        security: [],
        response: { 200: html },
      },
    },
    async (_request, reply) => send(reply, index),
  );
  app.get(
    '/console/status',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['console'],
        operationId: 'getConsoleStatus',
        summary: 'What the console shows before sign-in: whether the server has an admin token (no signature)',
        security: [],
        response: { 200: ConsoleStatus },
      },
    },
    async (_request, reply) => reply.headers(headers).send({ adminTokenConfigured: deps.adminTokenConfigured }),
  );
  app.get(
    '/console/:file',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['console'],
        operationId: 'getConsoleFile',
        summary: 'A script, style sheet or icon of the operator console (no signature)',
        security: [],
        params: FileParams,
        response: responses({ 200: asset }, ['NOT_FOUND']),
      },
    },
    async (request, reply) => {
      const file = assets.get(request.params.file);
      // A closed list of names: no path is ever built from the request.
      if (file === undefined) throw apiError('NOT_FOUND', 'no such console file');
      return send(reply, file);
    },
  );
  adminAccountRoutes(app, deps);
}
