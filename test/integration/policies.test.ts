import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());
// Each test states the policies it is about; the shipped sample policy would only get in the way.
beforeEach(async () => {
  await t.db.query('DELETE FROM auth_policies');
});

interface PolicyRow {
  scope?: string;
  condition?: Record<string, unknown>;
  level?: string;
  reason?: string;
  priority?: number;
  active?: boolean;
}

async function addPolicy(policy: PolicyRow): Promise<number> {
  const { rows } = await t.db.query<{ id: bigint }>(
    `INSERT INTO auth_policies (scope, condition, required_step_up, reason_code, priority, active)
     VALUES ($1, $2::jsonb, $3, $4, $5, $6) RETURNING id`,
    [
      policy.scope ?? 'global',
      JSON.stringify(policy.condition ?? {}),
      policy.level ?? 'OTP',
      policy.reason ?? 'test',
      policy.priority ?? 100,
      policy.active ?? true,
    ],
  );
  return Number(rows[0]?.id);
}

const baseRequest = {
  userId: 1,
  amount: '100',
  currency: 'THB',
  channel: 'INTERNAL_P2P',
  appId: 'wallet',
  operationType: 'P2P_TRANSFER',
};

async function evaluate(overrides: Record<string, unknown> = {}) {
  const res = await t.call('POST', '/policies/evaluate', { body: { ...baseRequest, ...overrides } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as {
    required: string;
    reasonCode: string;
    policyId: number;
    context: { dailyCumulative: string; isNewPayee: boolean };
  };
}

/** A settled intent of `userId` with its DEBIT history row, `offsetS` seconds after today's 00:00 UTC. */
async function settledDebit(options: {
  userId: number;
  amount: number;
  currency?: string;
  offsetS?: number;
  direction?: 'DEBIT' | 'CREDIT';
  status?: string;
  metadata?: Record<string, unknown>;
}): Promise<void> {
  const id = randomUUID();
  const currency = options.currency ?? 'THB';
  const midnightPlus = `(date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') + make_interval(secs => $2)`;
  await t.db.query(
    `INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel,
       from_account_name, to_account_name, from_user_id, amount, currency, status, metadata, created_at, updated_at)
     VALUES ($1, $3, 'wallet-api', 'test', $4, 'P2P_TRANSFER', 'INTERNAL_P2P', $5, 'user.999.THB', $4, $6, $7, $8, $9::jsonb,
       ${midnightPlus}, ${midnightPlus})`,
    [
      id,
      options.offsetS ?? 60,
      randomUUID(),
      options.userId,
      `user.${options.userId}.${currency}`,
      options.amount,
      currency,
      options.status ?? 'SETTLED',
      JSON.stringify(options.metadata ?? {}),
    ],
  );
  if ((options.status ?? 'SETTLED') !== 'SETTLED') return;
  await t.db.query(
    `INSERT INTO transactions (intent_id, account_name, user_id, operation_type, direction, amount, currency, created_at)
     VALUES ($1, $3, $4, 'P2P_TRANSFER', $5, $6, $7, ${midnightPlus})`,
    [
      id,
      options.offsetS ?? 60,
      `user.${options.userId}.${currency}`,
      options.userId,
      options.direction ?? 'DEBIT',
      options.amount,
      currency,
    ],
  );
}

describe('POST /policies/evaluate: decisions', () => {
  it('answers NONE / no_match / 0 when nothing matches (docs/rules.md R3, R4)', async () => {
    await addPolicy({ condition: { amount_gte: 1000 } });
    expect(await evaluate()).toEqual({
      required: 'NONE',
      reasonCode: 'no_match',
      policyId: 0,
      context: { dailyCumulative: '0', isNewPayee: false },
    });
  });

  it('answers the matching policy with its level, reason and id', async () => {
    const id = await addPolicy({ condition: {}, level: 'BIOMETRIC', reason: 'always' });
    expect(await evaluate()).toEqual({
      required: 'BIOMETRIC',
      reasonCode: 'always',
      policyId: id,
      context: { dailyCumulative: '0', isNewPayee: false },
    });
  });

  it.each([
    ['amount_lt', 1000, '999', '1000'],
    ['amount_gte', 1000, '1000', '999'],
    ['amount_lte', 1000, '1000', '1001'],
  ])('%s %d: matches %s, not %s', async (key, bound, matching, notMatching) => {
    await addPolicy({ condition: { [key]: bound }, reason: key });
    expect((await evaluate({ amount: matching })).reasonCode).toBe(key);
    expect((await evaluate({ amount: notMatching })).reasonCode).toBe('no_match');
  });

  it('compares amounts beyond 2^53 exactly, as bigint', async () => {
    await addPolicy({ condition: { amount_gte: 9_007_199_254_740_992 }, reason: 'huge' });
    expect((await evaluate({ amount: '9007199254740993' })).reasonCode).toBe('huge');
    expect((await evaluate({ amount: '9007199254740991' })).reasonCode).toBe('no_match');
    expect((await evaluate({ amount: '9999999999999999999' })).reasonCode).toBe('huge');
  });

  it('compares fractional bounds exactly', async () => {
    await addPolicy({ condition: { amount_gte: 100.5, amount_lte: 200.5 }, reason: 'between' });
    expect((await evaluate({ amount: '100' })).reasonCode).toBe('no_match');
    expect((await evaluate({ amount: '101' })).reasonCode).toBe('between');
    expect((await evaluate({ amount: '200' })).reasonCode).toBe('between');
    expect((await evaluate({ amount: '201' })).reasonCode).toBe('no_match');
  });

  it('currency: the request currency must equal the value', async () => {
    await addPolicy({ condition: { currency: 'USD' }, reason: 'usd' });
    expect((await evaluate({ currency: 'THB' })).reasonCode).toBe('no_match');
    expect((await evaluate({ currency: 'USD' })).reasonCode).toBe('usd');
  });

  it('combines all present keys with AND', async () => {
    await addPolicy({ condition: { amount_gte: 100, amount_lt: 200, currency: 'THB' }, reason: 'band' });
    expect((await evaluate({ amount: '150' })).reasonCode).toBe('band');
    expect((await evaluate({ amount: '150', currency: 'USD' })).reasonCode).toBe('no_match');
    expect((await evaluate({ amount: '200' })).reasonCode).toBe('no_match');
    expect((await evaluate({ amount: '99' })).reasonCode).toBe('no_match');
  });

  it('ignores unknown condition keys, alone or next to known ones', async () => {
    await addPolicy({ condition: { amount_gte: 500, velocity_gte: 3 }, reason: 'known', priority: 1 });
    await addPolicy({ condition: { device_risk: 'high' }, reason: 'unknown-only', priority: 2 });
    expect((await evaluate({ amount: '500' })).reasonCode).toBe('known');
    expect((await evaluate({ amount: '499' })).reasonCode).toBe('unknown-only');
  });

  it('a known key with a value of the wrong type never matches', async () => {
    await addPolicy({ condition: { amount_gte: '100' }, reason: 'string-bound' });
    await addPolicy({ condition: { new_payee: 'false' }, reason: 'string-flag' });
    expect((await evaluate({ amount: '1000' })).reasonCode).toBe('no_match');
  });

  it('returns BLOCK as a level like the others', async () => {
    await addPolicy({ condition: { amount_gte: 1 }, level: 'BLOCK', reason: 'blocked' });
    expect((await evaluate()).required).toBe('BLOCK');
  });

  it('ignores inactive policies', async () => {
    await addPolicy({ condition: {}, reason: 'off', active: false });
    expect((await evaluate()).reasonCode).toBe('no_match');
  });

  it('reads the table on every call: a change applies to the next request', async () => {
    const id = await addPolicy({ condition: { amount_gte: 1000 }, reason: 'big' });
    expect((await evaluate({ amount: '500' })).reasonCode).toBe('no_match');
    await t.db.query(`UPDATE auth_policies SET condition = '{"amount_gte": 100}' WHERE id = $1`, [id]);
    expect((await evaluate({ amount: '500' })).reasonCode).toBe('big');
    await t.db.query('UPDATE auth_policies SET active = false WHERE id = $1', [id]);
    expect((await evaluate({ amount: '500' })).reasonCode).toBe('no_match');
  });
});

describe('POST /policies/evaluate: priority and scopes', () => {
  it('checks priority ascending and takes the first match, whatever the levels', async () => {
    await addPolicy({ condition: { amount_gte: 1 }, level: 'KYC_UPLIFT', reason: 'p30', priority: 30 });
    await addPolicy({ condition: { amount_gte: 1 }, level: 'PIN', reason: 'p20', priority: 20 });
    await addPolicy({ condition: { amount_gte: 1_000_000 }, level: 'BLOCK', reason: 'p10-no-match', priority: 10 });
    const decision = await evaluate();
    expect(decision).toMatchObject({ required: 'PIN', reasonCode: 'p20' });
  });

  it('breaks a priority tie by id', async () => {
    const first = await addPolicy({ condition: {}, reason: 'first', priority: 5 });
    await addPolicy({ condition: {}, reason: 'second', priority: 5 });
    expect(await evaluate()).toMatchObject({ reasonCode: 'first', policyId: first });
  });

  it('loads global, app:{appId} and merchant:{merchantId} together, with no hierarchy', async () => {
    await addPolicy({ scope: 'global', reason: 'global', priority: 50 });
    await addPolicy({ scope: 'app:shop', reason: 'app', priority: 40 });
    await addPolicy({ scope: 'merchant:9', reason: 'merchant', priority: 30 });
    await addPolicy({ scope: 'app:other', reason: 'other-app', priority: 1 });
    await addPolicy({ scope: 'merchant:10', reason: 'other-merchant', priority: 1 });
    expect((await evaluate({ appId: 'shop', merchantId: 9 })).reasonCode).toBe('merchant');
    expect((await evaluate({ appId: 'shop' })).reasonCode).toBe('app');
    expect((await evaluate({ appId: 'wallet', merchantId: 9 })).reasonCode).toBe('merchant');
    expect((await evaluate({ appId: 'wallet' })).reasonCode).toBe('global');
    expect((await evaluate({ appId: 'shop2' })).reasonCode).toBe('global');
  });

  it('a global policy of lower priority number wins over a merchant one', async () => {
    await addPolicy({ scope: 'merchant:9', reason: 'merchant', priority: 30 });
    await addPolicy({ scope: 'global', reason: 'global', priority: 20 });
    expect((await evaluate({ merchantId: 9 })).reasonCode).toBe('global');
  });

  it('never loads merchant scopes without a merchantId', async () => {
    await addPolicy({ scope: 'merchant:9', reason: 'merchant' });
    expect((await evaluate()).reasonCode).toBe('no_match');
  });
});

describe('POST /policies/evaluate: context figures', () => {
  it('dailyCumulative counts settled debits since 00:00 UTC today, per currency, without the request amount (docs/rules.md R33)', async () => {
    const userId = 501;
    await settledDebit({ userId, amount: 5000, offsetS: -1 }); // 23:59:59 yesterday
    await settledDebit({ userId, amount: 3000, offsetS: 0 }); // 00:00:00 today
    await settledDebit({ userId, amount: 2000, offsetS: 1 });
    await settledDebit({ userId, amount: 7000, currency: 'USD', offsetS: 1 });
    await settledDebit({ userId, amount: 400, direction: 'CREDIT', offsetS: 1 });
    await settledDebit({ userId: 502, amount: 900, offsetS: 1 });
    await addPolicy({ condition: { daily_cumulative_gte: 5000 }, reason: 'daily' });

    const thb = await evaluate({ userId, amount: '1' });
    expect(thb).toMatchObject({ reasonCode: 'daily', context: { dailyCumulative: '5000', isNewPayee: false } });
    const usd = await evaluate({ userId, amount: '1', currency: 'USD' });
    expect(usd).toMatchObject({ reasonCode: 'daily', context: { dailyCumulative: '7000' } });
    expect((await evaluate({ userId: 502, amount: '4999' })).context.dailyCumulative).toBe('900');
    expect((await evaluate({ userId: 503 })).context.dailyCumulative).toBe('0');

    await t.db.query('UPDATE auth_policies SET condition = \'{"daily_cumulative_gte": 5001}\'');
    expect((await evaluate({ userId, amount: '100000' })).reasonCode).toBe('no_match');
  });

  it('new_payee: true until the user has a settled payment with metadata.merchantUserId = merchantId', async () => {
    const userId = 601;
    await settledDebit({ userId, amount: 100, metadata: { merchantUserId: 77 } });
    await settledDebit({ userId, amount: 100, metadata: { merchantUserId: '99' } });
    await settledDebit({ userId, amount: 100, status: 'FAILED', metadata: { merchantUserId: 88 } });
    await addPolicy({ condition: { new_payee: true }, level: 'OTP', reason: 'new_payee' });

    expect(await evaluate({ userId, merchantId: 77 })).toMatchObject({ reasonCode: 'no_match', context: { isNewPayee: false } });
    expect(await evaluate({ userId, merchantId: 99 })).toMatchObject({ reasonCode: 'no_match', context: { isNewPayee: false } });
    expect(await evaluate({ userId, merchantId: 88 })).toMatchObject({ reasonCode: 'new_payee', context: { isNewPayee: true } });
    expect(await evaluate({ userId: 602, merchantId: 77 })).toMatchObject({ reasonCode: 'new_payee', context: { isNewPayee: true } });
  });

  it('the new-payee probe can use the index of settled intents that name a merchant, custom or generic plan', async () => {
    // The index leaves out intents without a merchant (P2P payments): the probe's equality on
    // merchantUserId must imply its predicate, or the planner could not use it at all.
    const plans = await t.db.transaction(async (tx) => {
      await tx.query("SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)");
      await tx.query(`PREPARE new_payee_probe (bigint, text) AS SELECT EXISTS (SELECT 1 FROM intents i
                        WHERE i.status = 'SETTLED' AND i.from_user_id = $1 AND i.metadata->>'merchantUserId' = $2)`);
      const found: string[] = [];
      for (const mode of ['force_custom_plan', 'force_generic_plan']) {
        await tx.query("SELECT set_config('plan_cache_mode', $1, true)", [mode]);
        const { rows } = await tx.query<{ 'QUERY PLAN': string }>("EXPLAIN EXECUTE new_payee_probe (601, '77')");
        found.push(rows.map((row) => row['QUERY PLAN']).join('\n'));
      }
      await tx.query('DEALLOCATE new_payee_probe');
      return found;
    });
    expect(plans[1]).toContain('$1');
    for (const plan of plans) expect(plan).toContain('intents_merchant_payee_idx');
  });

  it('evaluations sent together each get their own payer figures', async () => {
    await settledDebit({ userId: 701, amount: 1000, metadata: { merchantUserId: 70 } });
    await settledDebit({ userId: 701, amount: 250, currency: 'USD' });
    await settledDebit({ userId: 702, amount: 30 });
    const asked = [
      { userId: 701, merchantId: 70, expected: { dailyCumulative: '1000', isNewPayee: false } },
      { userId: 701, merchantId: 71, expected: { dailyCumulative: '1000', isNewPayee: true } },
      { userId: 701, currency: 'USD', expected: { dailyCumulative: '250', isNewPayee: false } },
      { userId: 702, merchantId: 70, expected: { dailyCumulative: '30', isNewPayee: true } },
      { userId: 702, merchantId: 70, expected: { dailyCumulative: '30', isNewPayee: true } },
      { userId: 703, expected: { dailyCumulative: '0', isNewPayee: false } },
    ];
    const answers = await Promise.all(asked.map(({ expected: _, ...request }) => evaluate(request)));
    expect(answers.map((answer) => answer.context)).toEqual(asked.map((request) => request.expected));
  });

  it('without merchantId isNewPayee is false: new_payee true never matches, new_payee false does (docs/rules.md R33)', async () => {
    await addPolicy({ condition: { new_payee: true }, reason: 'new', priority: 1 });
    expect(await evaluate({ userId: 603 })).toMatchObject({ reasonCode: 'no_match', context: { isNewPayee: false } });
    await addPolicy({ condition: { new_payee: false }, reason: 'known', priority: 2 });
    expect((await evaluate({ userId: 603 })).reasonCode).toBe('known');
    expect((await evaluate({ userId: 603, merchantId: 5 })).reasonCode).toBe('new');
  });
});

describe('POST /policies/evaluate: refusals', () => {
  it.each([
    ['a missing userId', { userId: undefined }],
    ['userId 0', { userId: 0 }],
    ['userId as a string', { userId: '1' }],
    ['merchantId 0', { merchantId: 0 }],
    ['amount as a number', { amount: 100 }],
    ['a negative amount', { amount: '-1' }],
    ['a fractional amount', { amount: '1.5' }],
    ['an empty amount', { amount: '' }],
    ['an amount of 20 digits', { amount: '1'.repeat(20) }],
    ['a two-letter currency', { currency: 'TH' }],
    ['an empty channel', { channel: '' }],
    ['an appId of 51 characters', { appId: 'a'.repeat(51) }],
    ['a missing operationType', { operationType: undefined }],
    ['an unknown field', { deviceId: 'x' }],
  ])('answers 422 VALIDATION_ERROR for %s', async (_name, overrides) => {
    const body = JSON.parse(JSON.stringify({ ...baseRequest, ...overrides }));
    const res = await t.call('POST', '/policies/evaluate', { body });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('VALIDATION_ERROR');
  });

  it('answers 401 to an unsigned or badly signed request', async () => {
    const unsigned = await t.app.inject({ method: 'POST', url: '/policies/evaluate', payload: baseRequest });
    expect(unsigned.statusCode).toBe(401);
    expect(unsigned.json().error).toBe('UNAUTHORIZED');
    const badSignature = await t.call('POST', '/policies/evaluate', { body: baseRequest, headers: { 'x-signature': '0'.repeat(64) } });
    expect(badSignature.statusCode).toBe(401);
  });

  it('accepts any active key, also one without operation types', async () => {
    const res = await t.call('POST', '/policies/evaluate', { service: 'mobile-gateway', body: baseRequest });
    expect(res.statusCode).toBe(200);
  });
});
