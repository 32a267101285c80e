import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { demoConfigFile, healthWhenCalm, startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balances, createUser, intentBody, topUp } from '../support/payments.js';

let t: TestApp;
const file = demoConfigFile();

beforeAll(async () => {
  t = await startTestApp({
    file: {
      ...file,
      limitRules: [],
      feeRules: [
        {
          name: 'p2p flat',
          operationType: 'P2P_TRANSFER',
          expression: "[{account: 'system.revenue.THB', amount: 100}]",
          timing: 'PRE',
          tagsExclude: ['fee_exempt'],
        },
        {
          name: 'p2p percent',
          operationType: 'P2P_TRANSFER',
          expression: "[{account: 'system.revenue.THB', amount: amount * 0.015}]",
          timing: 'POST',
          tagsExclude: ['fee_exempt'],
        },
        {
          name: 'vip surcharge',
          operationType: 'P2P_TRANSFER',
          expression: "[{account: 'system.revenue.THB', amount: 10.6}, {account: 'system.revenue.THB', amount: 10.6}]",
          timing: 'PRE',
          tagsInclude: ['vip'],
          priority: 5,
        },
        {
          name: 'partner split',
          operationType: 'MINIAPP_CHARGE',
          expression: "[{account: 'system.revenue.THB', amount: 30}, {account: 'service.900001.THB', amount: 20}]",
          timing: 'POST',
        },
      ],
    },
  });
  for (const user of [1, 2, 3]) await createUser(t, user);
  await topUp(t, 1, 1_000_000);
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

const p2p = (amount: number, metadata: Record<string, unknown> = {}) =>
  t.call('POST', '/intents', { user: 1, body: intentBody({ operationType: 'P2P_TRANSFER', amount, recipientUserId: 2, metadata }) });

async function moved(work: () => Promise<unknown>) {
  const names = ['user.1.THB', 'user.2.THB', 'system.revenue.THB', 'service.900001.THB', 'system.transit.INTERNAL_P2P.THB'];
  const before = await balances(t, names);
  await work();
  const after = await balances(t, names);
  return Object.fromEntries(names.map((n) => [n, BigInt(after[n] ?? '0') - BigInt(before[n] ?? '0')]));
}

describe('fees on settled intents', () => {
  it('PRE and POST on one intent: sender pays amount + pre, receiver gets amount − post, revenue gets both', async () => {
    let body: Record<string, string> = {};
    const delta = await moved(async () => {
      const res = await p2p(10_000);
      expect(res.statusCode).toBe(201);
      body = res.json();
    });
    expect(body).toMatchObject({ preFeeAmount: '100', postFeeAmount: '150' });
    expect(delta).toEqual({
      'user.1.THB': -10_100n,
      'user.2.THB': 9_850n,
      'system.revenue.THB': 250n,
      'service.900001.THB': 0n,
      'system.transit.INTERNAL_P2P.THB': 0n,
    });
  });

  it('floors each split before summing per account (docs/rules.md R31): 10.6 + 10.6 → 20', async () => {
    const res = await p2p(1_000, { tags: ['vip'] });
    expect(res.json()).toMatchObject({ preFeeAmount: '120', postFeeAmount: '15' });
  });

  it('floors fractional POST fees: 1.5% of 999 is 14', async () => {
    expect((await p2p(999)).json()).toMatchObject({ postFeeAmount: '14' });
  });

  it('fee_exempt excluded by tagsExclude makes the intent free', async () => {
    const delta = await moved(async () => {
      expect((await p2p(5_000, { tags: ['fee_exempt'] })).json()).toMatchObject({ preFeeAmount: '0', postFeeAmount: '0' });
    });
    expect(delta['user.1.THB']).toBe(-5_000n);
    expect(delta['user.2.THB']).toBe(5_000n);
  });

  it('splits to several accounts, summed per account', async () => {
    await topUp(t, 3, 10_000);
    const delta = await moved(async () => {
      const res = await t.call('POST', '/intents', {
        user: 2,
        body: intentBody({ operationType: 'MINIAPP_CHARGE', amount: 1_000, metadata: { customerUserId: 1 } }),
      });
      expect(res.json()).toMatchObject({ status: 'SETTLED', preFeeAmount: '0', postFeeAmount: '50' });
    });
    expect(delta).toMatchObject({ 'user.1.THB': -1_000n, 'user.2.THB': 950n, 'system.revenue.THB': 30n, 'service.900001.THB': 20n });
  });

  it('a PRE fee counts towards the funds check', async () => {
    await topUp(t, 3, 0 + 1);
    const { balance } = (await t.call('GET', '/accounts/user.3.THB/balance')).json();
    const res = await t.call('POST', '/intents', {
      user: 3,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: Number(balance), recipientUserId: 2 }),
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('INSUFFICIENT_FUNDS');
  });
});

describe('quote', () => {
  it('previews the PRE fee without writing', async () => {
    const { rows: before } = await t.db.query<{ n: bigint }>('SELECT count(*) AS n FROM intents');
    const res = await t.call('POST', '/intents/quote', {
      body: { operationType: 'P2P_TRANSFER', amount: 2_000, metadata: { tags: ['vip'] } },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ fee: '120', totalCharge: '2120', breakdown: [{ account: 'system.revenue.THB', amount: '120' }] });
    const { rows: after } = await t.db.query<{ n: bigint }>('SELECT count(*) AS n FROM intents');
    expect(after[0]?.n).toBe(before[0]?.n);
  });

  it('refuses NFC_CHARGE and bad bodies with {error, details}', async () => {
    for (const body of [
      { operationType: 'NFC_CHARGE', amount: 1 },
      { operationType: 'P2P_TRANSFER', amount: 0 },
      { operationType: 'P2P_TRANSFER' },
    ]) {
      const res = await t.call('POST', '/intents/quote', { body });
      expect(res.statusCode).toBe(422);
      expect(res.json()).toEqual({ error: 'VALIDATION_ERROR', details: expect.arrayContaining([expect.stringMatching(/^body/)]) });
    }
  });
});

describe('fee rule dry-run', () => {
  const dryRun = (
    expression: string,
    context: Record<string, unknown> = { operationType: 'P2P_TRANSFER', amount: 10_000, currency: 'THB', metadata: {} },
  ) =>
    // Signed afresh each time (nonce): the same signed admin write twice would be a replay (docs/SECURITY.md §3).
    t.call('POST', '/admin/fee-rules/dry-run', { service: 'admin-tool', scheme: 'message', body: { expression, context } });

  it('returns splits summed per account and the total', async () => {
    const res = await dryRun(
      "[{account: 'system.revenue.THB', amount: amount / 3}, {account: 'system.revenue.THB', amount: 1}, {account: 'x', amount: metadata.tags.length}]",
      {
        operationType: 'P2P_TRANSFER',
        amount: 10_000,
        currency: 'THB',
        metadata: { tags: ['a', 'b'] },
      },
    );
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      splits: [
        { account: 'system.revenue.THB', amount: '3334' },
        { account: 'x', amount: '2' },
      ],
      totalFee: '3336',
    });
  });

  it.each([
    ['a non-array', '42'],
    ['a bad element', '[1]'],
    ['a negative amount', "[{account: 'a', amount: -1}]"],
    ['a non-finite amount', "[{account: 'a', amount: 1/0}]"],
    ['an exception', "(() => { throw new Error('boom') })()"],
    ['a host escape', "this.constructor.constructor('return process')()"],
    ['process.exit', 'process.exit(1)'],
    ['an endless loop', '(() => { while (true) {} })()'],
    ['memory exhaustion', "'x'.repeat(1e9)"],
  ])('answers 422 EVAL_ERROR for %s, promptly, and keeps serving', async (_name, expression) => {
    const started = Date.now();
    const res = await dryRun(expression);
    // Generous for a loaded CI machine: what matters is that the 100 ms limit stops it at all.
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error).toBe('EVAL_ERROR');
    expect((await healthWhenCalm(t.app)).statusCode).toBe(200);
    expect((await dryRun("[{account: 'a', amount: 1}]")).json().totalFee).toBe('1');
  });

  it('needs an admin key', async () => {
    expect(
      (
        await t.call('POST', '/admin/fee-rules/dry-run', {
          body: { expression: '[]', context: { operationType: 'X', amount: 1, currency: 'THB' } },
        })
      ).statusCode,
    ).toBe(403);
  });
});

describe('a stored rule that fails for a request', () => {
  it('refuses the intent with 422 EVAL_ERROR, stores nothing, and the next good intent settles', async () => {
    const { rows } = await t.db.query<{ id: bigint }>(
      "INSERT INTO fee_rules (name, operation_type, expression, timing, tags_include) VALUES ('evil', 'P2P_TRANSFER', '(() => { while (true) {} })()', 'PRE', '{evil}') RETURNING id",
    );
    const res = await p2p(100, { tags: ['evil'] });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('EVAL_ERROR');
    await t.db.query('UPDATE fee_rules SET active = false WHERE id = $1', [rows[0]?.id]);
    expect((await p2p(100)).statusCode).toBe(201);
  });
});
