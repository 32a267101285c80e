import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import type { ConfigFile } from '../../src/domain/bootstrap/config-file.js';
import { demoConfigFile, startTestApp, type TestApp } from '../support/app.js';
import { openTestDatabase } from '../support/database.js';

/**
 * docs/rules.md R67: what the admin API changed survives a restart; CONFIG_FILE seeds what is
 * absent, and its own change is applied with a log line and an admin_changes row. A "restart" here
 * is the whole app built again on the same database (applyConfig runs as at every start).
 */

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' };
const HOOK_URL = 'https://hooks.example.com/payorch';
/** Each test builds the whole app once or twice (a restart), which takes long on a loaded machine. */
const RESTARTS_MS_MAX = 120_000;

let db: Database;
let running: TestApp | undefined;
const logs: string[] = [];

/** The same database under every app of this file; closed once at the end. */
const sharedDb = (): Database => ({ ...db, close: async () => {} });

async function restart(file: ConfigFile = demoConfigFile()): Promise<TestApp> {
  await running?.close();
  running = await startTestApp({ db: sharedDb(), file, logStream: { write: (line) => logs.push(line) } });
  return running;
}

async function walletApiKey(t: TestApp): Promise<{ active: boolean; permissions: Record<string, unknown> }> {
  const res = await t.app.inject({ method: 'GET', url: '/admin/service-keys/wallet-api', headers: ADMIN });
  expect(res.statusCode).toBe(200);
  return res.json();
}

async function changesByConfigFile(): Promise<{ action: string; entity_id: string; before: unknown; after: unknown }[]> {
  const { rows } = await db.query<{ action: string; entity_id: string; before: unknown; after: unknown }>(
    "SELECT action, entity_id, before, after FROM admin_changes WHERE actor = 'CONFIG_FILE' ORDER BY id",
  );
  return rows;
}

beforeAll(async () => {
  db = await openTestDatabase();
});

afterAll(async () => {
  await running?.close();
  await db.close();
});

describe('who owns a service key: CONFIG_FILE seeds it, the admin API keeps it', () => {
  it(
    'seeds every key of an empty database once, each with a change-log row',
    async () => {
      await restart();
      const seeded = await changesByConfigFile();
      expect(seeded.map((row) => row.action)).toEqual(demoConfigFile().serviceKeys.map(() => 'create'));
      await restart();
      expect(await changesByConfigFile()).toHaveLength(seeded.length);
    },
    RESTARTS_MS_MAX,
  );

  it(
    'keeps a webhook URL set through the admin API across a restart with the same CONFIG_FILE',
    async () => {
      const t = running as TestApp;
      const before = await walletApiKey(t);
      const patched = await t.app.inject({
        method: 'PATCH',
        url: '/admin/service-keys/wallet-api',
        headers: ADMIN,
        payload: JSON.stringify({ permissions: { ...before.permissions, webhook: { url: HOOK_URL } } }),
      });
      expect(patched.statusCode).toBe(200);
      const changesBefore = await changesByConfigFile();

      const again = await restart();
      expect((await walletApiKey(again)).permissions.webhook).toEqual({ url: HOOK_URL });
      expect(await changesByConfigFile()).toEqual(changesBefore);
    },
    RESTARTS_MS_MAX,
  );

  it(
    "applies a changed CONFIG_FILE entry over the admin API's value, with a warning and a change-log row holding both",
    async () => {
      const file = demoConfigFile();
      const edited: ConfigFile = {
        ...file,
        serviceKeys: file.serviceKeys.map((key) =>
          key.serviceId === 'wallet-api' ? { ...key, permissions: { ...key.permissions, allowedOperationTypes: ['P2P_TRANSFER'] } } : key,
        ),
      };
      logs.length = 0;
      const t = await restart(edited);
      const key = await walletApiKey(t);
      expect(key.permissions.allowedOperationTypes).toEqual(['P2P_TRANSFER']);
      expect(key.permissions.webhook).toBeUndefined();

      const last = (await changesByConfigFile()).at(-1);
      expect(last).toMatchObject({ action: 'update', entity_id: 'wallet-api', before: { permissions: { webhook: { url: HOOK_URL } } } });
      const warning = logs.map((line) => JSON.parse(line) as { event?: string; level: number; serviceId?: string });
      expect(warning.filter((line) => line.event === 'config_file_service_key_overwritten')).toEqual([
        expect.objectContaining({ level: 40, serviceId: 'wallet-api' }),
      ]);

      // The same edited file again: nothing more is overwritten.
      const count = (await changesByConfigFile()).length;
      await restart(edited);
      expect(await changesByConfigFile()).toHaveLength(count);
    },
    RESTARTS_MS_MAX,
  );
});
