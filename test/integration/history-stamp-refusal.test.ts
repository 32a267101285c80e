import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runAudit } from '../../src/domain/audit/audit.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balances, createUser, intentBody, topUp } from '../support/payments.js';

// docs/rules.md R58: balance history's stamp check refuses at COMMIT a transaction that stalled
// for more than 2 s after its ledger write. Through the group commit, the path every payment takes:
// the committer runs the refused work once more with fresh stamps; refused again, the request is
// 503 SERVICE_UNAVAILABLE with Retry-After and nothing stored. The stall is real: a trigger on the
// rows the batch writes after its ledger call sleeps past the bound, as a lock wait or a stalled
// disk would.
let t: TestApp;
const PAYER = 701;
const PAYEE = 702;
const OTHERS = [703, 704, 705];
const FUNDS = 100_000;
const wallet = (user: number) => `user.${user}.THB`;

/** The next `stalls` inserts of a history row of `user` (transactions, after the ledger call) sleep past the bound. */
async function stall(user: number, stalls: number): Promise<void> {
  await t.db.query('DELETE FROM test_stall');
  await t.db.query('INSERT INTO test_stall (user_id, stalls) VALUES ($1, $2)', [user, stalls]);
  await t.db.exec('ALTER SEQUENCE test_stall_seq RESTART');
}

const stallsTaken = async () =>
  Number((await t.db.query<{ taken: string }>('SELECT last_value::text AS taken FROM test_stall_seq')).rows[0]?.taken);

const pay = (user: number, amount: number, idempotencyKey?: string) =>
  t.call('POST', '/intents', {
    user,
    body: intentBody({ operationType: 'P2P_TRANSFER', amount, recipientUserId: PAYEE, ...(idempotencyKey ? { idempotencyKey } : {}) }),
  });

beforeAll(async () => {
  t = await startTestApp();
  for (const user of [PAYER, PAYEE, ...OTHERS]) await createUser(t, user);
  for (const user of [PAYER, ...OTHERS]) await topUp(t, user, FUNDS);
  await t.db.exec(`
    CREATE TABLE test_stall (user_id bigint PRIMARY KEY, stalls bigint NOT NULL);
    CREATE SEQUENCE test_stall_seq;
    CREATE FUNCTION test_stall() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      v_stalls bigint;
    BEGIN
      SELECT s.stalls INTO v_stalls FROM test_stall s WHERE s.user_id = NEW.user_id;
      -- A sequence, not a counter row: the refused transaction rolls back, its nextval does not.
      IF v_stalls IS NOT NULL AND nextval('test_stall_seq') <= v_stalls THEN
        PERFORM pg_sleep(2.4);
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER test_stall BEFORE INSERT ON transactions FOR EACH ROW EXECUTE FUNCTION test_stall();`);
}, 180_000);
afterAll(async () => t?.close());
afterEach(async () => {
  await t.db.query('DELETE FROM test_stall');
  await expectLedgerInvariants(t.db);
  expect((await runAudit(t.db)).violations).toEqual([]);
});

describe('a COMMIT refused by the stamp check, through the group commit', () => {
  it('is committed again by the committer: the payment is 201 and moved once', async () => {
    const before = await balances(t, [wallet(PAYER), wallet(PAYEE)]);
    await stall(PAYER, 1);
    const res = await pay(PAYER, 1_000);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().status).toBe('SETTLED');
    // The first attempt did stall (and was refused); the second went through.
    expect(await stallsTaken()).toBeGreaterThanOrEqual(2);
    expect(await balances(t, [wallet(PAYER), wallet(PAYEE)])).toEqual({
      [wallet(PAYER)]: String(Number(before[wallet(PAYER)]) - 1_000),
      [wallet(PAYEE)]: String(Number(before[wallet(PAYEE)]) + 1_000),
    });
    const history = await t.db.query<{ n: string }>('SELECT count(*)::text AS n FROM transactions WHERE intent_id = $1', [
      res.json().intentId,
    ]);
    expect(history.rows[0]?.n).toBe('2');
  }, 30_000);

  it('answers every payment of the refused batch, each moved once', async () => {
    const payers = [PAYER, ...OTHERS];
    const before = await balances(t, [...payers.map(wallet), wallet(PAYEE)]);
    await stall(PAYER, 1);
    const answers = await Promise.all(payers.map((user) => pay(user, 100)));
    for (const res of answers) {
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().status).toBe('SETTLED');
    }
    const after = await balances(t, [...payers.map(wallet), wallet(PAYEE)]);
    for (const user of payers) expect(after[wallet(user)]).toBe(String(Number(before[wallet(user)]) - 100));
    expect(after[wallet(PAYEE)]).toBe(String(Number(before[wallet(PAYEE)]) + 100 * payers.length));
  }, 30_000);

  it('refused again, is 503 with Retry-After and nothing stored; the same key then succeeds', async () => {
    const before = await balances(t, [wallet(PAYER), wallet(PAYEE)]);
    await stall(PAYER, 2);
    const key = randomUUID();
    const refused = await pay(PAYER, 2_500, key);
    expect(refused.statusCode, refused.body).toBe(503);
    expect(refused.json().error).toBe('SERVICE_UNAVAILABLE');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // No table names, no SQL: what a caller may read.
    expect(refused.body).not.toMatch(/LDG02|ledger_account_history|transactions/);
    expect(await balances(t, [wallet(PAYER), wallet(PAYEE)])).toEqual(before);
    const stored = await t.db.query('SELECT id FROM intents WHERE idempotency_key = $1', [key]);
    expect(stored.rows).toEqual([]);

    const again = await pay(PAYER, 2_500, key);
    expect(again.statusCode, again.body).toBe(201);
    expect(again.json().status).toBe('SETTLED');
    expect((await balances(t, [wallet(PAYER)]))[wallet(PAYER)]).toBe(String(Number(before[wallet(PAYER)]) - 2_500));
  }, 30_000);
});
