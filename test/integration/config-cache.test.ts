import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { ConfigCache } from '../../src/domain/auth/config-cache.js';
import { feeRulesOf } from '../../src/domain/auth/config-snapshot.js';
import { applyConfig } from '../../src/domain/bootstrap/apply-config.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { openTestDatabase } from '../support/database.js';
import { demoConfigFile } from '../support/app.js';

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
  await applyConfig(db, new SqlLedger(), demoConfigFile());
});
afterAll(async () => db?.close());

describe('the config cache', () => {
  it('answers from memory while nothing changed', async () => {
    const cache = new ConfigCache(db);
    const first = await cache.fresh();
    expect(await cache.fresh()).toBe(first);
    expect(first.serviceKeys.get('wallet-api')?.active).toBe(true);
  });

  it('sees a change made by raw SQL on the next call, on every instance', async () => {
    const [one, two] = [new ConfigCache(db), new ConfigCache(db)];
    await Promise.all([one.fresh(), two.fresh()]);
    await db.query("UPDATE service_keys SET active = false WHERE service_id = 'mobile-gateway'");
    expect((await one.fresh()).serviceKeys.get('mobile-gateway')?.active).toBe(false);
    expect((await two.fresh()).serviceKeys.get('mobile-gateway')?.active).toBe(false);
    await db.query("UPDATE service_keys SET active = true WHERE service_id = 'mobile-gateway'");
    expect((await two.fresh()).serviceKeys.get('mobile-gateway')?.active).toBe(true);
  });

  it('tracks routes, fee rules, limit rules and policies', async () => {
    const cache = new ConfigCache(db);
    const before = await cache.fresh();
    await db.query("UPDATE routes SET active = false WHERE operation_type = 'NFC_CHARGE'");
    await db.query("INSERT INTO fee_rules (name, operation_type, expression) VALUES ('cache test', 'NFC_CHARGE', '[]')");
    await db.query("UPDATE limit_rules SET limit_value = 7 WHERE name = 'daily p2p debit'");
    await db.query("INSERT INTO auth_policies (scope, required_step_up, reason_code) VALUES ('app:cache-test', 'PIN', 'cache_test')");
    const after = await cache.fresh();
    expect(after.version).toBeGreaterThan(before.version);
    expect(after.routes.some((route) => route.operationType === 'NFC_CHARGE')).toBe(false);
    expect(feeRulesOf(after, 'NFC_CHARGE').map((rule) => rule.name)).toEqual(['cache test']);
    expect(after.limitRules.find((rule) => rule.name === 'daily p2p debit')?.limit).toBe(7n);
    expect(after.policies.get('app:cache-test')?.map((policy) => policy.reasonCode)).toEqual(['cache_test']);
  });

  it('never goes back to an older snapshot when loads finish out of order', async () => {
    const cache = new ConfigCache(db);
    const loads = await Promise.all([
      cache.fresh(),
      db.query('UPDATE routes SET priority = priority WHERE id < 0').then(() => cache.fresh()),
    ]);
    const latest = await cache.fresh();
    expect(latest.version).toBeGreaterThanOrEqual(loads[0].version);
    expect(latest.version).toBeGreaterThanOrEqual(loads[1].version);
  });
});
