import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, topUp } from '../support/payments.js';
import { payout, registerIpps } from '../support/workers.js';

/**
 * The backlogs an operator met as zeros with the workers down: this app runs no
 * workers, so a payout stays open and webhook events stay untaken, and /metrics must say how old
 * they are. The audit gauges follow GET /admin/audit.
 */

const ADMIN = { authorization: 'Bearer test-admin-token' };
let t: TestApp;

async function samples(): Promise<Map<string, number>> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  const values = new Map<string, number>();
  for (const line of res.body.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    values.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return values;
}

beforeAll(async () => {
  t = await startTestApp();
  await createUser(t, 3601);
  await registerIpps(t, 3601);
  await topUp(t, 3601, 500_000);
});
afterAll(async () => {
  await t?.close();
});

describe('age metrics with the workers down', () => {
  it('no open payout, no webhook service, no audit yet: age 0, audit result -1 and time 0', async () => {
    const before = await samples();
    expect(before.get('payorch_payout_oldest_open_age_seconds')).toBe(0);
    expect(before.get('payorch_audit_last_ok')).toBe(-1);
    expect(before.get('payorch_audit_last_run_timestamp_seconds')).toBe(0);
    expect([...before.keys()].filter((name) => name.startsWith('payorch_event_feed_lag_seconds'))).toEqual([]);
  });

  it('a payout nobody drives shows its age; a webhook service nobody delivers to shows its feed lag', async () => {
    const key = (await t.app.inject({ method: 'GET', url: '/admin/service-keys/wallet-api', headers: ADMIN })).json() as {
      permissions: object;
    };
    const patched = await t.app.inject({
      method: 'PATCH',
      url: '/admin/service-keys/wallet-api',
      headers: { ...ADMIN, 'content-type': 'application/json' },
      payload: JSON.stringify({ permissions: { ...key.permissions, webhook: { url: 'https://hooks.example.com/payorch' } } }),
    });
    expect(patched.statusCode).toBe(200);
    await payout(t, 3601, '0836000001', 1_000);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const now = await samples();
    expect(now.get('payorch_payout_oldest_open_age_seconds')).toBeGreaterThanOrEqual(1);
    expect(now.get('payorch_event_feed_lag_seconds{reader="webhook:wallet-api"}')).toBeGreaterThanOrEqual(1);
    await expectLedgerInvariants(t.db);
  });

  it('the last audit: result, violations and time', async () => {
    const startedS = Date.now() / 1000 - 1;
    expect((await t.app.inject({ method: 'GET', url: '/admin/audit', headers: ADMIN })).statusCode).toBe(200);
    const now = await samples();
    expect(now.get('payorch_audit_last_ok')).toBe(1);
    expect(now.get('payorch_audit_last_violations')).toBe(0);
    expect(now.get('payorch_audit_last_run_timestamp_seconds')).toBeGreaterThanOrEqual(startedS);
  });
});
