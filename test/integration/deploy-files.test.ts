import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { DEMO_CONFIG_FILE, loadConfig, readConfigFile, secretsOf } from '../../src/config.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { createTestSchema } from '../support/database.js';
import { buildIfStale, type ServiceProcess, spawnService } from '../support/service-process.js';

/**
 * The deployment files (Dockerfile, compose.yaml, deploy/): Docker cannot run here, so what can
 * be checked is checked. The dashboard and the alert rules parse and name only metrics a running
 * `payorch serve` exposes after a payment; compose.yaml's services, variables and health checks
 * agree with the configuration the service reads and with the Dockerfile.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const secret = secretsOf(readConfigFile(DEMO_CONFIG_FILE)).get('wallet-api')?.[0] ?? '';
const STARTUP_MS_MAX = 60_000;
/** Metrics Prometheus makes itself, never in /metrics. */
const PROMETHEUS_OWN = new Set(['up']);
/** The pool gauges exist on PostgreSQL only: PGlite is one connection, no pool. */
const POSTGRES_ONLY = /^payorch_db_pool_/;
/** Variables the OpenTelemetry SDK reads itself (bin/payorch.js starts it). */
const OTEL_VARIABLE = /^OTEL_[A-Z_]+$/;

interface Compose {
  services: Record<
    string,
    {
      environment?: Record<string, string>;
      healthcheck?: { test: string[] };
      volumes?: string[];
      depends_on?: Record<string, unknown> | string[];
      ports?: string[];
    }
  >;
}
interface AlertRules {
  groups: Array<{ name: string; rules: Array<{ alert: string; expr: string; for?: string }> }>;
}
interface Dashboard {
  uid: string;
  panels: Array<{ title: string; datasource: { uid: string }; targets: Array<{ expr: string }> }>;
}

const compose = parseYaml(read('compose.yaml'), { merge: true }) as Compose;
const alerts = parseYaml(read('deploy/prometheus/alerts.yaml')) as AlertRules;
const prometheus = parseYaml(read('deploy/prometheus/prometheus.yaml')) as {
  rule_files: string[];
  scrape_configs: Array<{ job_name: string; static_configs: Array<{ targets: string[] }> }>;
};
const dashboard = JSON.parse(read('deploy/grafana/payorch.json')) as Dashboard;
const dockerfile = read('Dockerfile');

/** The metric names a PromQL expression uses: ours, Node's and the process's, and Prometheus' `up`. */
function metricNames(expr: string): string[] {
  // Label names (`by (…)` lists, `{…}` matchers) are not metrics, even when one starts like one.
  const selectors = expr.replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '').replace(/\{[^}]*\}/g, '');
  return [...selectors.matchAll(/\b((?:payorch|nodejs|process)_[a-z0-9_]+|up)\b(?!\s*\()/g)].map((match) => match[1] ?? '');
}

const DEPLOY_ADMIN_TOKEN = 'deploy-files-admin-token';
let service: ServiceProcess;
let exposed: Set<string>;
let dropSchema = async () => {};

async function call(method: 'GET' | 'POST', path: string, body: unknown, userId: number) {
  const raw = JSON.stringify(body);
  const headers = { ...signedHeaders('wallet-api', secret, method, path, raw, { userId }), 'content-type': 'application/json' };
  return fetch(`${service.url}${path}`, { method, headers, body: raw });
}

beforeAll(async () => {
  await buildIfStale();
  const schema = pgUrl === undefined ? undefined : await createTestSchema(pgUrl, 'deploy');
  if (schema !== undefined) dropSchema = schema.drop;
  service = await spawnService(
    {
      DATABASE_URL: schema?.url ?? 'memory://',
      REDIS_URL: '',
      // A balance check soon after the start: its PSPX call and result have series in /metrics.
      BALANCE_MONITOR_INTERVAL_MS: '100',
      AUTH_FAILURE_BURST: '1',
      ADMIN_TOKEN: DEPLOY_ADMIN_TOKEN,
    },
    STARTUP_MS_MAX,
  );
  // The workload every panel and rule can show: a settled payment, a 401 and a 429.
  for (const user of [9101, 9102]) expect((await call('POST', '/accounts', { userId: user, currency: 'THB' }, user)).status).toBe(201);
  const topUp = await call('POST', '/intents', { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: 1_000 }, 9101);
  expect(topUp.status).toBe(201);
  const pay = { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 9102 };
  expect((await call('POST', '/intents', pay, 9101)).status).toBe(201);
  // An audit and a webhook service: the audit gauges and a feed reader's lag have series then.
  const admin = { authorization: `Bearer ${DEPLOY_ADMIN_TOKEN}` };
  expect((await fetch(`${service.url}/admin/audit`, { headers: admin })).status).toBe(200);
  const key = (await (await fetch(`${service.url}/admin/service-keys/wallet-api`, { headers: admin })).json()) as { permissions: object };
  const webhook = { permissions: { ...key.permissions, webhook: { url: 'https://hooks.example.com/payorch' } } };
  const patched = await fetch(`${service.url}/admin/service-keys/wallet-api`, {
    method: 'PATCH',
    headers: { ...admin, 'content-type': 'application/json' },
    body: JSON.stringify(webhook),
  });
  expect(patched.status).toBe(200);
  const unsigned = () => fetch(`${service.url}/intents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  expect((await unsigned()).status).toBe(401);
  const refusals = [];
  for (let i = 0; i < 3; i += 1) refusals.push((await unsigned()).status);
  expect(refusals).toContain(429);
  // Every sample name, once the balance monitor has run.
  for (;;) {
    const text = await (await fetch(`${service.url}/metrics`)).text();
    exposed = new Set(text.split('\n').flatMap((line) => (line === '' || line.startsWith('#') ? [] : [line.split(/[{ ]/)[0] ?? ''])));
    if (exposed.has('payorch_balance_checks_total')) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}, 120_000);

afterAll(async () => {
  service?.child.kill('SIGTERM');
  await service?.exited;
  await dropSchema();
});

function expectExposed(names: readonly string[], where: string): void {
  const missing = names.filter(
    (name) => !exposed.has(name) && !PROMETHEUS_OWN.has(name) && !(pgUrl === undefined && POSTGRES_ONLY.test(name)),
  );
  expect(missing, `${where} names metrics /metrics does not have`).toEqual([]);
}

describe('Grafana dashboard deploy/grafana/payorch.json', () => {
  it('queries only metrics that /metrics exposes, through the provisioned Prometheus data source', () => {
    const datasources = parseYaml(read('deploy/grafana/provisioning/datasources/prometheus.yaml')) as {
      datasources: Array<{ uid: string }>;
    };
    const uids = datasources.datasources.map((source) => source.uid);
    expect(dashboard.panels.length).toBeGreaterThan(0);
    for (const panel of dashboard.panels) {
      expect(uids, panel.title).toContain(panel.datasource.uid);
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets) {
        expect(metricNames(target.expr).length, target.expr).toBeGreaterThan(0);
        expectExposed(metricNames(target.expr), `panel "${panel.title}"`);
      }
    }
    // What the issue asks the dashboard to show.
    const shown = dashboard.panels.flatMap((panel) => panel.targets.flatMap((target) => metricNames(target.expr)));
    for (const name of [
      'payorch_http_request_duration_seconds_count',
      'payorch_http_request_duration_seconds_bucket',
      'payorch_outbox_depth',
      'payorch_outbox_oldest_job_age_seconds',
      'payorch_intents_manual_review',
      'payorch_pspx_partner_balance',
      'payorch_pspx_balance_difference',
    ]) {
      expect(shown).toContain(name);
    }
  });
});

describe('Prometheus files deploy/prometheus/', () => {
  it('alert rules parse, each with a name and an expression over metrics /metrics exposes', () => {
    const rules = alerts.groups.flatMap((group) => group.rules);
    expect(rules.length).toBeGreaterThanOrEqual(7);
    expect(new Set(rules.map((rule) => rule.alert)).size).toBe(rules.length);
    for (const rule of rules) {
      expect(rule.alert).toMatch(/^Payorch[A-Za-z]+$/);
      expect(metricNames(rule.expr).length, rule.alert).toBeGreaterThan(0);
      expectExposed(metricNames(rule.expr), `alert ${rule.alert}`);
      if (rule.for !== undefined) expect(rule.for).toMatch(/^\d+[smh]$/);
    }
  });

  it('scrapes the api and workers services of compose.yaml on their port, and loads the rules file compose mounts', () => {
    const targets = prometheus.scrape_configs.flatMap((job) => job.static_configs.flatMap((config) => config.targets));
    expect(targets.sort()).toEqual(['api:3000', 'workers:3000']);
    for (const target of targets) expect(compose.services[target.split(':')[0] ?? '']?.environment?.PORT).toBe('3000');
    const mounts = compose.services.prometheus?.volumes ?? [];
    // Prometheus reads rule_files relative to its config file's directory where compose mounts it.
    const configMount = mounts.find((mount) => mount.startsWith('./deploy/prometheus/prometheus.yaml:'))?.split(':')[1] ?? '';
    const rulesPath = posix.resolve(posix.dirname(configMount), prometheus.rule_files[0] ?? '');
    expect(mounts).toContain(`./deploy/prometheus/alerts.yaml:${rulesPath}:ro`);
  });
});

describe('compose.yaml and Dockerfile', () => {
  it('has the services the deployment needs, an api and a workers role on one PostgreSQL and Redis', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['api', 'grafana', 'postgres', 'prometheus', 'redis', 'workers']);
    const { api, workers } = compose.services;
    expect(api?.environment?.PAYORCH_ROLE).toBe('api');
    expect(workers?.environment?.PAYORCH_ROLE).toBe('workers');
    for (const role of [api, workers]) {
      expect(role?.environment?.DATABASE_URL).toMatch(/^postgres:\/\/[^@]+@postgres:5432\//);
      expect(role?.environment?.REDIS_URL).toBe('redis://redis:6379');
      expect(role?.environment?.HOST).toBe('0.0.0.0');
      expect(role?.healthcheck?.test.join(' ')).toContain('/readyz');
    }
  });

  it('sets only variables the service reads', () => {
    for (const name of ['api', 'workers'] as const) {
      const environment = compose.services[name]?.environment ?? {};
      const readByConfig = new Set<string>();
      loadConfig(
        new Proxy(environment, {
          get: (target, key) => {
            if (typeof key === 'string') readByConfig.add(key);
            return target[key as string];
          },
        }),
      );
      const unread = Object.keys(environment).filter((key) => !readByConfig.has(key) && !OTEL_VARIABLE.test(key));
      expect(unread, `${name} sets variables nothing reads`).toEqual([]);
    }
  });

  it('mounts files that exist: the dashboard, its provisioning and the Prometheus configuration', () => {
    const mounted = Object.values(compose.services).flatMap((service) => service.volumes ?? []);
    const files = mounted.filter((volume) => volume.startsWith('./')).map((volume) => volume.split(':')[0] ?? '');
    expect(files).toContain('./deploy/grafana/payorch.json');
    for (const file of files) expect(existsSync(join(root, file)), file).toBe(true);
  });

  it('Dockerfile: multi-stage, production dependencies only, non-root, listening on every interface, HEALTHCHECK on /livez', () => {
    expect(dockerfile.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^USER (?!root)\S+/m);
    expect(dockerfile).toMatch(/HOST=0\.0\.0\.0/);
    expect(dockerfile).toMatch(/HEALTHCHECK[\s\S]*\/livez/);
    // Every path the package ships ("files") is copied into the runtime image.
    const { files } = JSON.parse(read('package.json')) as { files: string[] };
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    for (const file of files) expect(runtime, file).toMatch(new RegExp(`^COPY (--from=build /app/)?${file}\\b`, 'm'));
  });
});
