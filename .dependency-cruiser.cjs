// The import rules of the house (`npm run lint`): no import circle, type imports included, and
// every import runs down the floors below, never up. Read each list bottom up: a file may import
// its own floor and the floors under it. A new folder gets its floor here.

/** The house: the client package at the ground, the command line at the top. */
const HOUSE = [
  ['packages/client/'],
  ['src/assert-never\\.ts$', 'src/version\\.ts$'],
  ['src/adapters/'],
  ['src/ledger/', 'src/telemetry\\.ts$'],
  ['src/domain/'],
  ['src/config\\.ts$', 'src/observability/'],
  ['src/http/', 'src/workers/', 'src/production-checks\\.ts$', 'src/client\\.ts$'],
  ['src/app\\.ts$'],
  ['src/main\\.ts$'],
  ['src/cli/'],
];

/** The domain's capabilities: the vocabulary at the ground, whole use cases at the top. */
const DOMAIN = [
  ['src/domain/(model|errors|wire-types)\\.ts$'],
  ['src/domain/admin/'],
  ['src/domain/accounts/'],
  ['src/domain/channels/'],
  ['src/domain/events/'],
  ['src/domain/rules/'],
  ['src/domain/auth/'],
  ['src/domain/intents/'],
  ['src/domain/invoices/', 'src/domain/audit/', 'src/domain/bootstrap/'],
];

/** An intent's path: stored, then money moved, then committed in batches, then created from a request. */
const INTENTS = [
  ['src/domain/intents/store/'],
  ['src/domain/intents/money/'],
  ['src/domain/intents/commit/'],
  ['src/domain/intents/create/'],
];

/** HTTP: the request and response schemas, the shared pieces, the plugins every route runs behind, the routes. */
const HTTP = [['src/http/schemas/'], ['src/http/[^/]+\\.ts$'], ['src/http/plugins/'], ['src/http/routes/']];

const either = (paths) => `(${paths.join('|')})`;

/** One rule per floor: nothing on it imports a floor above. Peers on one floor do not import each other. */
function floors(name, list) {
  return list
    .flatMap((floor, index) => {
      const above = list.slice(index + 1).flat();
      const peers = (own) => floor.filter((other) => other !== own);
      return floor.map((room) => ({
        name: `${name}: ${room} imports upward`,
        severity: 'error',
        from: { path: room },
        to: { path: either([...above, ...peers(room)]) },
      }));
    })
    .filter((rule) => rule.to.path !== '()');
}

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'files that import each other in a loop', from: {}, to: { circular: true } },
    ...floors('house', HOUSE),
    ...floors('domain', DOMAIN),
    ...floors('intents', INTENTS),
    ...floors('http', HTTP),
  ],
  options: {
    // Type-only imports count: a type import is an arrow in the drawing as much as any other.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules)/' },
  },
};
