import assert from 'node:assert/strict';
import { CoalescedReads, type Departure } from '../../adapters/coalesced-reads.js';
import type { Sql } from '../../adapters/database.js';
import type { Permissions } from './service-keys.js';
import type { ConfigSnapshot } from './config-snapshot.js';
import type { FeeRule } from '../rules/fees/index.js';
import type { LimitDirection, LimitType, LimitWindow } from '../rules/limits.js';
import type { Channel, StepUpLevel } from '../model.js';
import type { AuthPolicy } from '../rules/policies.js';

/**
 * Keeps the latest snapshot and checks it against the database's version once per call of
 * `fresh()`: one single-row read instead of a read per table, and a change made by anyone (the
 * admin API, another instance, raw SQL: triggers bump the version) applies to the next request.
 * No LISTEN/NOTIFY: a notification arrives after the commit, so a request sent right after a
 * change could still see the old value; PGlite has no second session to listen on either.
 */
export class ConfigCache {
  private latest: ConfigSnapshot | null = null;
  private loading: Promise<ConfigSnapshot> | null = null;

  /** Requests that arrive together share one read of the version. */
  private readonly versionReads: CoalescedReads<'version', bigint>;

  constructor(
    private readonly sql: Sql,
    departure: Departure = 'at-once',
  ) {
    this.versionReads = new CoalescedReads(async () => {
      const { rows } = await sql.query<{ version: bigint }>('SELECT version FROM config_version');
      const version = rows[0]?.version;
      assert.equal(typeof version, 'bigint', 'config_version must hold one row');
      return new Map([['version', version as bigint]]);
    }, departure);
  }

  /** The snapshot as of now: one shared round trip, two when the version moved. */
  async fresh(): Promise<ConfigSnapshot> {
    const version = (await this.versionReads.load(['version'])).get('version');
    return this.atLeast(version!);
  }

  private async atLeast(version: bigint): Promise<ConfigSnapshot> {
    const current = this.latest;
    if (current !== null && current.version >= version) return current;
    // A load in flight may have started before `version` was committed: use it only if it is
    // new enough, else load again. Loads never move `latest` backwards.
    const inFlight = this.loading ?? this.startLoad();
    const loaded = await inFlight;
    if (loaded.version >= version) return loaded;
    return this.startLoad();
  }

  private startLoad(): Promise<ConfigSnapshot> {
    const load = loadSnapshot(this.sql).then((snapshot) => {
      if (this.latest === null || snapshot.version > this.latest.version) this.latest = snapshot;
      return snapshot;
    });
    this.loading = load;
    const clear = () => {
      if (this.loading === load) this.loading = null;
    };
    load.then(clear, clear);
    return load;
  }
}

interface SnapshotRow {
  version: bigint;
  service_keys: Array<{ serviceId: string; active: boolean; permissions: Permissions }>;
  routes: Array<{ operationType: string; minAmount: string; maxAmount: string | null; channel: Channel }>;
  fee_rules: Array<Omit<FeeRule, 'id'> & { id: string }>;
  limit_rules: Array<{
    id: string;
    name: string;
    operationType: string;
    direction: LimitDirection;
    window: LimitWindow;
    limitType: LimitType;
    limit: string;
    currency: string;
  }>;
  policies: Array<Omit<AuthPolicy, 'id'> & { id: string }>;
}

/**
 * One statement, so one snapshot: the version and the tables it describes cannot disagree.
 * int8 values travel as text, because JSON numbers stop being exact past 2^53.
 */
const SNAPSHOT_SQL = `SELECT
  (SELECT version FROM config_version) AS version,
  (SELECT coalesce(json_agg(json_build_object('serviceId', service_id, 'active', active, 'permissions', permissions)), '[]')
     FROM service_keys) AS service_keys,
  (SELECT coalesce(json_agg(json_build_object('operationType', operation_type, 'minAmount', min_amount::text,
            'maxAmount', max_amount::text, 'channel', channel) ORDER BY priority, id), '[]')
     FROM routes WHERE active) AS routes,
  (SELECT coalesce(json_agg(json_build_object('id', id::text, 'name', name, 'operationType', operation_type,
            'expression', expression, 'timing', timing, 'tagsInclude', tags_include, 'tagsExclude', tags_exclude,
            'priority', priority, 'active', active) ORDER BY priority, id), '[]')
     FROM fee_rules WHERE active) AS fee_rules,
  (SELECT coalesce(json_agg(json_build_object('id', id::text, 'name', name, 'operationType', operation_type,
            'direction', direction, 'window', time_window, 'limitType', limit_type, 'limit', limit_value::text,
            'currency', currency) ORDER BY id), '[]')
     FROM limit_rules WHERE active) AS limit_rules,
  (SELECT coalesce(json_agg(json_build_object('id', id::text, 'scope', scope, 'condition', condition,
            'requiredStepUp', required_step_up, 'reasonCode', reason_code, 'priority', priority) ORDER BY priority, id), '[]')
     FROM auth_policies WHERE active) AS policies`;

async function loadSnapshot(sql: Sql): Promise<ConfigSnapshot> {
  const { rows } = await sql.query<SnapshotRow>(SNAPSHOT_SQL);
  const row = rows[0];
  assert.ok(row !== undefined, 'the snapshot query returns one row');
  return {
    version: row.version,
    serviceKeys: new Map(row.service_keys.map((key) => [key.serviceId, key])),
    routes: row.routes.map((route) => ({
      operationType: route.operationType,
      minAmount: BigInt(route.minAmount),
      maxAmount: route.maxAmount === null ? null : BigInt(route.maxAmount),
      channel: route.channel,
    })),
    feeRules: groupBy(
      row.fee_rules.map((rule) => ({ ...rule, id: Number(rule.id) })),
      (rule) => rule.operationType,
    ),
    limitRules: row.limit_rules.map((rule) => ({ ...rule, id: Number(rule.id), limit: BigInt(rule.limit) })),
    policies: groupBy(
      row.policies.map((policy) => ({ ...policy, id: Number(policy.id), requiredStepUp: policy.requiredStepUp as StepUpLevel })),
      (policy) => policy.scope,
    ),
  };
}

/** Keeps the input order within each group. */
function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [item]);
    else group.push(item);
  }
  return groups;
}
