import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';

/**
 * deploy/prometheus/alerts.yaml through Prometheus' own promtool (Debian's `prometheus` package;
 * .ci/run installs it): the rules check, and unit tests that feed series and expect each alert to
 * fire, or not, when it should. Without promtool this fails, it never skips.
 */

const run = promisify(execFile);
const rulesFile = fileURLToPath(new URL('../../deploy/prometheus/alerts.yaml', import.meta.url));
const configFile = fileURLToPath(new URL('../../deploy/prometheus/prometheus.yaml', import.meta.url));
const PROMTOOL = process.env.PROMTOOL ?? 'promtool';

interface Rule {
  readonly alert: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

let dir: string;
let rules: Map<string, Rule>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'payorch-promtool-'));
  const parsed = parseYaml(await readFile(rulesFile, 'utf8')) as { groups: { rules: Rule[] }[] };
  rules = new Map(parsed.groups.flatMap((group) => group.rules).map((rule) => [rule.alert, rule]));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** What promtool expects of a firing alert: its labels and annotations, as the rules file has them. */
function firing(alert: string): { exp_labels: Record<string, string>; exp_annotations: Record<string, string> } {
  const rule = rules.get(alert);
  if (rule === undefined) throw new Error(`no alert ${alert} in ${rulesFile}`);
  return { exp_labels: { ...rule.labels }, exp_annotations: { ...rule.annotations } };
}

interface Case {
  readonly name: string;
  /** Series in promtool's notation, one sample a minute. */
  readonly series: Record<string, string>;
  readonly alert: string;
  /** Minutes after the start at which the alert is expected quiet, and firing. */
  readonly quietAt: number;
  readonly firingAt: number;
}

const CASES: readonly Case[] = [
  {
    name: 'a payout that stays open (workers down) pages after 15 minutes and 5 of them',
    series: { 'payorch_payout_oldest_open_age_seconds{instance="workers:3000"}': '0+60x40' },
    alert: 'PayorchPayoutStuck',
    quietAt: 15,
    firingAt: 25,
  },
  {
    name: 'the balance monitor only ever skipped (PSPX never answered): the ok/drift series do not exist at all',
    series: { 'payorch_balance_checks_total{instance="workers:3000",result="skipped"}': '0+1x60' },
    alert: 'PayorchBalanceUnchecked',
    quietAt: 0,
    firingAt: 40,
  },
  {
    name: 'a failed audit pages at once',
    series: { 'payorch_audit_last_ok{instance="api:3000"}': '1x5 0x10' },
    alert: 'PayorchAuditFailed',
    quietAt: 3,
    firingAt: 8,
  },
  {
    name: 'no audit for more than 25 hours',
    series: { 'payorch_audit_last_run_timestamp_seconds{instance="api:3000"}': '0x1800' },
    alert: 'PayorchAuditStale',
    quietAt: 60,
    firingAt: 1620,
  },
  {
    name: 'webhook events not taken by the workers (feed lag) page after 15 minutes and 5 of them',
    series: { 'payorch_event_feed_lag_seconds{instance="api:3000",reader="webhook:wallet-api"}': '0+60x40' },
    alert: 'PayorchWebhookDelayed',
    quietAt: 15,
    firingAt: 25,
  },
  {
    name: 'dead webhook deliveries open a ticket',
    series: { 'payorch_webhook_dead{instance="api:3000"}': '0x5 2x10' },
    alert: 'PayorchWebhookDead',
    quietAt: 3,
    firingAt: 8,
  },
  {
    name: 'a feed reader more than 5 minutes behind',
    series: { 'payorch_event_feed_lag_seconds{instance="api:3000",reader="nats:PAYORCH_EVENTS"}': '0+60x30' },
    alert: 'PayorchEventFeedLagging',
    quietAt: 5,
    firingAt: 15,
  },
  {
    name: 'a reconciled day whose lines all match but whose movements differ (a top-up the statement lacks) opens a ticket',
    series: {
      'payorch_reconciliation_breaks{instance="workers:3000",kind="MISSING_AT_PROVIDER"}': '0x20',
      'payorch_reconciliation_movement_difference{instance="workers:3000"}': '0x2 -10000000x20',
    },
    alert: 'PayorchReconciliationMovementDiffers',
    quietAt: 4,
    firingAt: 10,
  },
];

describe('alert rules under promtool', () => {
  it('the shipped Prometheus config passes `promtool check config` beside its rules and a token file', async () => {
    // As an operator checks it: the config, its rules and the token file in one directory.
    const configDir = await mkdtemp(join(dir, 'config-'));
    await writeFile(join(configDir, 'prometheus.yaml'), await readFile(configFile, 'utf8'));
    await writeFile(join(configDir, 'alerts.yaml'), await readFile(rulesFile, 'utf8'));
    await writeFile(join(configDir, 'metrics-token'), 'a-metrics-token-of-at-least-32-bytes');
    const { stdout } = await run(PROMTOOL, ['check', 'config', join(configDir, 'prometheus.yaml')]);
    expect(stdout).toMatch(/SUCCESS: 1 rule files found/);
    expect(stdout).toMatch(/SUCCESS: \d+ rules found/);
  });
  it('pass `promtool check rules`', async () => {
    const { stdout } = await run(PROMTOOL, ['check', 'rules', rulesFile]);
    expect(stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('fire when they should and not before (`promtool test rules`)', async () => {
    const tests = CASES.map((test) => ({
      name: test.name,
      interval: '1m',
      input_series: Object.entries(test.series).map(([series, values]) => ({ series, values })),
      alert_rule_test: [
        { eval_time: `${test.quietAt}m`, alertname: test.alert, exp_alerts: [] },
        { eval_time: `${test.firingAt}m`, alertname: test.alert, exp_alerts: [firing(test.alert)] },
      ],
    }));
    const testFile = join(dir, 'alerts.test.yaml');
    await writeFile(testFile, stringifyYaml({ rule_files: [rulesFile], evaluation_interval: '1m', tests }));
    const result = await run(PROMTOOL, ['test', 'rules', testFile]).then(
      ({ stdout }) => stdout,
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ''}${error.stderr ?? ''}`,
    );
    expect(result).toContain('SUCCESS');
  });
});
