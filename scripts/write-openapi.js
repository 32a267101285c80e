// Writes docs/openapi.json from the built app: `npm run openapi` builds first, because Node 20
// cannot run the TypeScript sources. test/integration/openapi-drift.test.ts fails when the
// committed file and the app disagree. The output has no timestamp, so it changes only when
// a route or a schema does.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../dist/app.js';
import { createMemoryBroker } from '../dist/adapters/broker.js';
import { openDatabase } from '../dist/adapters/database.js';
import { createPspxClient } from '../dist/adapters/pspx/pspx-client.js';
import { loadConfig } from '../dist/config.js';
import { createFeeEngine } from '../dist/domain/rules/fees/index.js';
import { SqlLedger } from '../dist/ledger/sql-ledger.js';
// The plugin's types add swagger() to the Fastify instance; the app registers the plugin itself.
/** @import {} from '@fastify/swagger' */

const target = fileURLToPath(new URL('../docs/openapi.json', import.meta.url));

// Building the app touches neither the database nor the network; they exist only to satisfy its
// dependencies. A fixed QR secret keeps the start quiet.
const db = await openDatabase('memory://', '');
const fees = await createFeeEngine();
const app = await buildApp({
  config: loadConfig({ QR_SIGNING_SECRET: 'openapi' }),
  db,
  ledger: new SqlLedger(),
  broker: createMemoryBroker(),
  pspx: createPspxClient({ baseUrl: 'http://127.0.0.1:9' }),
  fees,
  secrets: () => new Map(),
});
try {
  await app.ready();
  await writeFile(target, `${JSON.stringify(app.swagger(), null, 2)}\n`);
  console.log(`wrote ${target}`);
} finally {
  await app.close();
  fees.dispose();
  await db.close();
}
