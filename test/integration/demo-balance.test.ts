/**
 * The demo as `npm start` runs it: `payorch serve` with the built-in PSPX simulator and the demo
 * config. Top-ups and withdrawals move the ledger's PSPX nostro without a payout; the simulator
 * books them as the rails would (src/adapters/pspx/simulator-rails.ts), so the balance monitor
 * keeps reporting balance_ok instead of balance_drift.
 */
import { createPayorchClient, type PayorchClient } from '@payorch/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../../src/config.js';
import { createTestSchema, type TestSchema } from '../support/database.js';
import { buildIfStale, type ServiceProcess, spawnService } from '../support/service-process.js';

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const ADMIN_TOKEN = 'demo-balance-admin-token';
const USER = 7401;
/** The README's top-up amount; the demo config's drift threshold is 10 000 satang, so two of them alone would drift. */
const TOP_UP = 10_000;
const WITHDRAWAL = 5_000;

let service: ServiceProcess;
let schema: TestSchema | undefined;

beforeAll(async () => {
  await buildIfStale();
  let databaseUrl = 'memory://';
  if (pgUrl !== undefined) {
    schema = await createTestSchema(pgUrl, 'demo');
    databaseUrl = schema.url;
  }
  // No PSPX_URL: the built-in simulator, as in the demo.
  service = await spawnService(
    { DATABASE_URL: databaseUrl, PSPX_URL: '', ADMIN_TOKEN, QR_SIGNING_SECRET: 'demo-balance-qr', BALANCE_MONITOR_INTERVAL_MS: '100' },
    60_000,
  );
}, 90_000);
afterAll(async () => {
  service?.child.kill('SIGTERM');
  await service?.exited;
  await schema?.drop();
});

interface BalanceLine {
  readonly event: string;
  readonly nostroBalance?: string;
  readonly partnerBalance?: string;
  readonly difference?: string;
}

const balanceLines = (): BalanceLine[] =>
  service.logs
    .filter((line) => line.includes('"event":"balance_'))
    .map((line) => JSON.parse(line) as BalanceLine)
    .filter((line) => line.event !== 'balance_baseline_captured');

async function waitFor<T>(what: string, probe: () => T | undefined, msMax = 20_000): Promise<T> {
  const until = Date.now() + msMax;
  for (;;) {
    const found = probe();
    if (found !== undefined) return found;
    if (Date.now() > until) throw new Error(`${what}: not seen within ${msMax} ms\n${service.logs.slice(-10).join('\n')}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

it('after two top-ups and a withdrawal the balance monitor reports balance_ok, never balance_drift', async () => {
  const wallet: PayorchClient = createPayorchClient({
    baseUrl: service.url,
    serviceId: 'wallet-api',
    secret: secretsOf(readConfigFile(DEMO_CONFIG_FILE)).get('wallet-api')?.[0] ?? '',
  });
  const startingNostro = await waitFor('a first balance reading', () => balanceLines().find((line) => line.event === 'balance_ok'));

  await wallet.accounts.create({ userId: USER });
  for (let n = 0; n < 2; n++) {
    expect(await wallet.intents.create({ operationType: 'QP_TOPUP', amount: TOP_UP }, { userId: USER })).toMatchObject({
      status: 'SETTLED',
    });
  }
  const withdrawal = await wallet.intents.create(
    { operationType: 'WITHDRAWAL', amount: WITHDRAWAL, externalRef: 'bank-7401' },
    { userId: USER },
  );
  expect(withdrawal).toMatchObject({ status: 'SETTLED' });

  // The nostro gave 2 × 10 000 to the wallet and took the withdrawal's 5 000 back (its fee goes to revenue).
  const nostroAfter = BigInt(startingNostro.nostroBalance ?? '0') - BigInt(2 * TOP_UP) + BigInt(WITHDRAWAL);
  // The provider holds what the rails brought in and paid out. A reading can straddle the
  // withdrawal's commit (the ledger read after it, the provider's balance before the rails booked
  // it); the monitor's expected range covers that and says balance_ok, and the next reading has both.
  const partnerAfter = BigInt(startingNostro.partnerBalance ?? '0') + BigInt(2 * TOP_UP - WITHDRAWAL);
  const reading = await waitFor('a reading after the three intents', () =>
    balanceLines().find((line) => line.nostroBalance === nostroAfter.toString() && line.partnerBalance === partnerAfter.toString()),
  );
  expect(reading).toMatchObject({ event: 'balance_ok', difference: '0' });
  expect(balanceLines().filter((line) => line.event !== 'balance_ok')).toEqual([]);

  // The money itself: the service's own invariant audit (ledger balanced, transit accounts, postings).
  const admin = createPayorchClient({ baseUrl: service.url, adminToken: ADMIN_TOKEN });
  expect(await admin.admin.audit()).toMatchObject({ ok: true, violations: [] });
});
