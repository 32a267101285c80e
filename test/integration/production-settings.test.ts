import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEMO_CONFIG_FILE, loadConfig, readConfigFile } from '../../src/config.js';
import type { ConfigFile } from '../../src/domain/bootstrap/config-file.js';
import { refuseUnstatedSigningInDatabase, unsafeProductionSettings } from '../../src/production-checks.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { startTestApp } from '../support/app.js';
import { buildIfStale, spawnService } from '../support/service-process.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const strong = () => randomBytes(24).toString('base64url');

/** The demo config with a fresh secret per service: what an operator would ship. `keys` changes its service keys. */
function safeConfigFile(
  overrides: Record<string, string | string[]> = {},
  keys: (file: ConfigFile) => ConfigFile['serviceKeys'] = (f) => f.serviceKeys,
): string {
  const file = readConfigFile(DEMO_CONFIG_FILE);
  const secrets = Object.fromEntries(Object.keys(file.secrets).map((id) => [id, strong()]));
  const path = join(mkdtempSync(join(tmpdir(), 'payorch-prod-')), 'config.json');
  writeFileSync(path, JSON.stringify({ ...file, serviceKeys: keys(file), secrets: { ...secrets, ...overrides } }));
  return path;
}

/** Every key that can create intents refuses the legacy scheme. */
const signingRequired = (file: ConfigFile) =>
  file.serviceKeys.map((key) =>
    key.permissions.allowedOperationTypes.length === 0
      ? key
      : { ...key, permissions: { ...key.permissions, requireMessageSignatures: true } },
  );

/** wallet-api as an operator who has not decided how it signs would write it. */
const unstated = (file: ConfigFile) =>
  file.serviceKeys.map((key) => {
    if (key.serviceId !== 'wallet-api') return key;
    const { requireMessageSignatures: _dropped, ...permissions } = key.permissions;
    return { ...key, permissions };
  });

const safeEnv = (): Record<string, string> => ({
  NODE_ENV: 'production',
  CONFIG_FILE: safeConfigFile(),
  QR_SIGNING_SECRET: strong(),
  ADMIN_TOKEN: strong(),
  METRICS_TOKEN: strong(),
  PSPX_SIMULATOR: '1',
});

const problemsWith = (env: Record<string, string | undefined>) => {
  const full = { ...safeEnv(), ...env };
  for (const [name, value] of Object.entries(full)) if (value === undefined) delete full[name];
  return unsafeProductionSettings(loadConfig(full as Record<string, string>));
};

describe('production refuses unsafe settings', () => {
  it('accepts an operator config with strong secrets', () => {
    expect(problemsWith({})).toEqual([]);
  });

  it.each([
    ['CONFIG_FILE unset', { CONFIG_FILE: undefined }, /^CONFIG_FILE is unset/],
    [
      'a demo secret in CONFIG_FILE',
      { CONFIG_FILE: safeConfigFile({ 'wallet-api': 'demo-wallet-api-secret-change-me' }) },
      /^CONFIG_FILE secret of wallet-api/,
    ],
    [
      'a demo secret among rotated ones',
      { CONFIG_FILE: safeConfigFile({ exchange: [strong(), 'demo-admin-panel-secret-change-me'] }) },
      /^CONFIG_FILE secret of exchange/,
    ],
    [
      'a secret with the placeholder',
      { CONFIG_FILE: safeConfigFile({ 'wallet-api': `${strong()}-CHANGE-ME` }) },
      /^CONFIG_FILE secret of wallet-api/,
    ],
    ['QR_SIGNING_SECRET unset', { QR_SIGNING_SECRET: undefined }, /^QR_SIGNING_SECRET is unset/],
    ['QR_SIGNING_SECRET of 31 characters', { QR_SIGNING_SECRET: 'q'.repeat(31) }, /^QR_SIGNING_SECRET is shorter than 32/],
    ['ADMIN_TOKEN of 31 characters', { ADMIN_TOKEN: 'a'.repeat(31) }, /^ADMIN_TOKEN is shorter than 32/],
    ['ADMIN_TOKEN with the placeholder', { ADMIN_TOKEN: `${'a'.repeat(32)}change-me` }, /^ADMIN_TOKEN is a demo secret/],
    ['PSPX_URL unset without PSPX_SIMULATOR=1', { PSPX_SIMULATOR: undefined }, /^PSPX_URL is unset/],
    ['PSPX_URL without a scheme', { PSPX_URL: 'pspx.example:8443' }, /^PSPX_URL is not an absolute http/],
    ['PSPX_URL that is not a URL', { PSPX_URL: 'https//pspx example' }, /^PSPX_URL is not an absolute http/],
    ['PSPX_URL of another scheme', { PSPX_URL: 'ftp://pspx.example' }, /^PSPX_URL is not an absolute http/],
    ['PSPX_URL with credentials', { PSPX_URL: 'https://user:pw@pspx.example' }, /^PSPX_URL is not an absolute http/],
    ['METRICS_TOKEN unset', { METRICS_TOKEN: undefined }, /^METRICS_TOKEN is unset/],
    ['METRICS_TOKEN of 31 bytes', { METRICS_TOKEN: 'm'.repeat(31) }, /^METRICS_TOKEN is shorter than 32 bytes/],
    ['CURSOR_SECRET of 31 bytes', { CURSOR_SECRET: 'c'.repeat(31) }, /^CURSOR_SECRET is shorter than 32 bytes/],
    ['CURSOR_SECRET with the placeholder', { CURSOR_SECRET: `${'c'.repeat(32)}change-me` }, /^CURSOR_SECRET is a demo secret/],
    [
      'a CONFIG_FILE secret of 31 bytes',
      { CONFIG_FILE: safeConfigFile({ exchange: 'e'.repeat(31) }) },
      /^CONFIG_FILE secret of exchange is shorter than 32 bytes/,
    ],
    [
      'a CONFIG_FILE secret of 16 two-byte characters',
      { CONFIG_FILE: safeConfigFile({ exchange: 'é'.repeat(15) }) },
      /^CONFIG_FILE secret of exchange is shorter/,
    ],
    [
      'a key that can create intents without requireMessageSignatures',
      { CONFIG_FILE: safeConfigFile({}, unstated) },
      /^CONFIG_FILE service key wallet-api can create intents but does not set permissions\.requireMessageSignatures/,
    ],
  ])('refuses %s', (_name, env, message) => {
    const problems = problemsWith(env);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(message);
  });

  it('allows a missing ADMIN_TOKEN and a real provider without the simulator switch', () => {
    expect(problemsWith({ ADMIN_TOKEN: undefined, PSPX_SIMULATOR: undefined, PSPX_URL: 'https://pspx.example' })).toEqual([]);
  });

  it('seals cursors with CURSOR_SECRET when set, else with QR_SIGNING_SECRET, which production requires (docs/rules.md R63)', () => {
    expect(loadConfig({ QR_SIGNING_SECRET: 'q'.repeat(32) }).cursorSealSecret).toBe('q'.repeat(32));
    expect(loadConfig({ QR_SIGNING_SECRET: 'q'.repeat(32), CURSOR_SECRET: 'c'.repeat(32) }).cursorSealSecret).toBe('c'.repeat(32));
    expect(problemsWith({ CURSOR_SECRET: strong() })).toEqual([]);
  });

  it('refuses nothing outside production: the demo runs on the demo config', () => {
    expect(unsafeProductionSettings(loadConfig({}))).toEqual([]);
  });

  it('never names the value of a secret', () => {
    const leaked = 'x'.repeat(10);
    const problems = problemsWith({
      ADMIN_TOKEN: leaked,
      QR_SIGNING_SECRET: leaked,
      CONFIG_FILE: safeConfigFile({ 'wallet-api': `${leaked}change-me` }),
    });
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.join('\n')).not.toContain(leaked);
  });
});

describe('payorch serve with NODE_ENV=production', () => {
  beforeAll(buildIfStale, 120_000);

  it('exits non-zero with one line naming the setting, before it opens the database', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'payorch-prod-data-'));
    const env = { ...process.env, ...safeEnv(), DATABASE_URL: '', DATA_DIR: dataDir, PORT: '0' };
    delete (env as Record<string, string | undefined>).CONFIG_FILE;
    const { code, stderr, stdout } = await new Promise<{ code: number | null; stderr: string; stdout: string }>((resolve) => {
      const child = execFile(process.execPath, ['bin/payorch.js', 'serve'], { cwd: root, env }, (_error, out, err) =>
        resolve({ code: child.exitCode, stdout: out, stderr: err }),
      );
    });
    expect(code).not.toBe(0);
    const lines = `${stdout}${stderr}`.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/NODE_ENV=production: CONFIG_FILE is unset/);
  }, 60_000);

  it('starts with safe settings; /metrics needs its token; a key that requires message signatures refuses a replayed X-Signature', async () => {
    const metricsToken = strong();
    const env = { ...safeEnv(), METRICS_TOKEN: metricsToken, CONFIG_FILE: safeConfigFile({}, signingRequired) };
    const secret = readConfigFile(env.CONFIG_FILE).secrets['wallet-api'] as string;
    const service = await spawnService({ ...env, DATABASE_URL: 'memory://' }, 60_000);
    try {
      const res = await fetch(`${service.url}/health`);
      expect(res.status).toBe(200);
      expect((await fetch(`${service.url}/metrics`)).status).toBe(401);
      expect((await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).status).toBe(200);
      // A captured legacy request, re-sent with another X-User-Id: X-Signature does not cover it.
      const body = JSON.stringify({ idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 1, recipientUserId: 2 });
      const headers = {
        ...signedHeaders('wallet-api', secret, 'POST', '/intents', body),
        'content-type': 'application/json',
        'x-user-id': '1',
      };
      const replayed = await fetch(`${service.url}/intents`, { method: 'POST', headers, body });
      expect(replayed.status).toBe(401);
      expect(((await replayed.json()) as { message: string }).message).toMatch(/must sign with an HTTP message signature/);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }, 90_000);
});

describe('service keys written through the admin API in production (docs/rules.md R60)', () => {
  it('a start refuses an active key in the database that can create intents without saying how it signs, naming it', async () => {
    const t = await startTestApp({ env: { NODE_ENV: 'production' } });
    try {
      const production = { ...t.config, production: true };
      await expect(refuseUnstatedSigningInDatabase(production, t.db)).resolves.toBeUndefined();
      await t.db.query(
        `INSERT INTO service_keys (service_id, active, permissions) VALUES ('legacy-partner', true, '{"allowedOperationTypes": ["P2P_TRANSFER"]}')`,
      );
      await expect(refuseUnstatedSigningInDatabase(production, t.db)).rejects.toThrow(
        /database service key legacy-partner can create intents but does not set permissions\.requireMessageSignatures/,
      );
      await expect(refuseUnstatedSigningInDatabase({ ...t.config, production: false }, t.db)).resolves.toBeUndefined();

      // The admin API keeps the database that way: a create or a merge patch that leaves it unsaid is 422.
      const admin = (method: string, url: string, body: unknown) => t.call(method, url, { service: 'admin-tool', body });
      const created = await admin('POST', '/admin/service-keys', {
        serviceId: 'new-partner',
        permissions: { allowedOperationTypes: ['P2P_TRANSFER'] },
      });
      expect(created.statusCode, created.body).toBe(422);
      expect(created.json().message).toMatch(/requireMessageSignatures/);
      const patched = await admin('PATCH', '/admin/service-keys/mobile-gateway', {
        permissions: { allowedOperationTypes: ['P2P_TRANSFER'] },
      });
      expect(patched.statusCode, patched.body).toBe(422);
      const stated = await admin('PATCH', '/admin/service-keys/mobile-gateway', {
        permissions: { allowedOperationTypes: ['P2P_TRANSFER'], requireMessageSignatures: true },
      });
      expect(stated.statusCode, stated.body).toBe(200);
    } finally {
      await t.close();
    }
  }, 120_000);
});
