import { setTimeout as sleep } from 'node:timers/promises';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ledger } from '../../src/ledger/ledger.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balance, createUser, intentBody, topUp } from '../support/payments.js';

/**
 * POST /intents commits the intents that arrive together in one transaction (group commit).
 * A burst of payments, some of which must be refused, gets the answers that one-by-one
 * processing would give, and the ledger stays balanced.
 */

const POISON_AMOUNT = 777n;
/** A payment whose history row the database refuses (a trigger), in the batch's last statement; under the recipients' daily credit limit. */
const CLOSE_FAILURE_AMOUNT = 1_234;
/**
 * While a burst is on, every ledger call takes 200 ms, so the payments that arrive meanwhile
 * queue for the next transaction; with poison on, a batch holding the poison amount throws, as an
 * unexpected database error would.
 */
const burst = { on: false, poison: false };
const poisoned = (inner: Ledger): Ledger => ({
  createAccounts: (sql, accounts) => inner.createAccounts(sql, accounts),
  lookupAccounts: (sql, ids) => inner.lookupAccounts(sql, ids),
  lookupTransfers: (sql, ids) => inner.lookupTransfers(sql, ids),
  expirePendingTransfers: (sql, n) => inner.expirePendingTransfers(sql, n),
  createTransfers: async (sql, transfers) => {
    if (burst.on) {
      await sleep(200);
      if (burst.poison && transfers.some((t) => t.amount === POISON_AMOUNT)) throw new Error('injected ledger failure');
    }
    return inner.createTransfers(sql, transfers);
  },
});

const PAYERS = Array.from({ length: 30 }, (_, i) => 1 + i);
const RECIPIENTS = PAYERS.map((p) => 100 + p);
const UNFUNDED = [41, 42, 43];
const LIMITED_RECIPIENT = 200;
const LIMITED_PAYERS = [51, 52, 53, 54];
const POISON_PAYER = 60;
const POISON_RECIPIENT = 61;
const AMOUNT = 500;
const FEE = 3;
const CREDIT_LIMIT = 1_500;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ wrapLedger: poisoned });
  const everyone = [...PAYERS, ...RECIPIENTS, ...UNFUNDED, LIMITED_RECIPIENT, ...LIMITED_PAYERS, POISON_PAYER, POISON_RECIPIENT];
  for (const user of everyone) await createUser(t, user);
  for (const user of [...PAYERS, ...LIMITED_PAYERS, POISON_PAYER]) await topUp(t, user, 10_000);
  await t.db.query(
    `INSERT INTO fee_rules (name, operation_type, expression, timing) VALUES ('p2p fee', 'P2P_TRANSFER', '[{account: "system.revenue.THB", amount: ${FEE}}]', 'PRE')`,
  );
  await t.db.query(
    `INSERT INTO limit_rules (name, operation_type, direction, time_window, limit_type, limit_value)
     VALUES ('daily p2p credit', 'P2P_TRANSFER', 'CREDIT', 'DAILY', 'AMOUNT', ${CREDIT_LIMIT})`,
  );
});
afterAll(async () => t?.close());

const pay = (payer: number, recipient: number, amount = AMOUNT) =>
  t.call('POST', '/intents', { user: payer, body: intentBody({ operationType: 'P2P_TRANSFER', amount, recipientUserId: recipient }) });

/** payorch_intent_commit_bets_total by `ledger_call outcome`, e.g. `with-close lost`. */
async function bets(): Promise<Record<string, number>> {
  const text = (await t.call('GET', '/metrics')).body;
  const counts: Record<string, number> = {};
  for (const [, labels, value] of text.matchAll(/^payorch_intent_commit_bets_total\{([^}]*)\} (\S+)$/gm)) {
    const label = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(labels!)?.[1];
    counts[`${label('ledger_call')} ${label('outcome')}`] = Number(value);
  }
  return counts;
}

const betsSince = (before: Record<string, number>, after: Record<string, number>) =>
  Object.fromEntries(Object.keys(after).flatMap((key) => (after[key] === before[key] ? [] : [[key, after[key]! - (before[key] ?? 0)]])));

async function batchSizes(): Promise<{ count: number; sum: number }> {
  const text = (await t.call('GET', '/metrics')).body;
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { count: read('payorch_intent_commit_batch_size_count'), sum: read('payorch_intent_commit_batch_size_sum') };
}

/**
 * The first answer is the poison payer's 500, the others settled; the poison payment moved no
 * money and left no intent, and the ledger is balanced.
 */
async function expectOnlyPoisonFailed(answers: readonly LightMyRequestResponse[]): Promise<void> {
  expect(answers[0]!.statusCode, answers[0]!.body).toBe(500);
  expect(answers[0]!.json().error).toBe('INTERNAL_ERROR');
  for (const res of answers.slice(1)) {
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().status).toBe('SETTLED');
  }
  expect(await balance(t, `user.${POISON_PAYER}.THB`)).toBe(10_000n);
  expect(await balance(t, `user.${POISON_RECIPIENT}.THB`)).toBe(0n);
  const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM intents WHERE from_user_id = $1', [POISON_PAYER]);
  expect(rows[0]!.n, 'the failed payment left no intent').toBe(0);
  await expectLedgerInvariants(t.db);
}

describe('a burst of payments committed together', () => {
  it('settles every payment that may settle, refuses the rest alone, and batches them', async () => {
    const revenueBefore = await balance(t, 'system.revenue.THB');
    const before = await batchSizes();
    const betsBefore = await bets();
    burst.on = true;
    const answers = await Promise.all([
      ...PAYERS.map((payer, i) => pay(payer, RECIPIENTS[i]!)),
      ...UNFUNDED.map((payer) => pay(payer, LIMITED_RECIPIENT)),
      ...LIMITED_PAYERS.map((payer) => pay(payer, LIMITED_RECIPIENT)),
    ]).finally(() => {
      burst.on = false;
    });
    const at = (from: number, count: number) => answers.slice(from, from + count);
    const plain = at(0, PAYERS.length);
    const unfunded = at(PAYERS.length, UNFUNDED.length);
    const limited = at(PAYERS.length + UNFUNDED.length, LIMITED_PAYERS.length);

    for (const res of plain) {
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().status).toBe('SETTLED');
    }
    for (const res of unfunded) {
      expect(res.statusCode, res.body).toBe(422);
      // Refused by the ledger or, once the recipient's limit is used up, by the limit first.
      expect(['INSUFFICIENT_FUNDS', 'LIMIT_EXCEEDED']).toContain(res.json().error);
    }
    // The recipient's daily credit limit holds three payments: a refused payment in the same
    // burst must not use up any of it.
    expect(limited.map((res) => res.statusCode).sort()).toEqual([201, 201, 201, 422]);
    expect(limited.find((res) => res.statusCode === 422)!.json().error).toBe('LIMIT_EXCEEDED');

    for (const recipient of RECIPIENTS) expect(await balance(t, `user.${recipient}.THB`)).toBe(BigInt(AMOUNT));
    for (const payer of PAYERS) expect(await balance(t, `user.${payer}.THB`)).toBe(BigInt(10_000 - AMOUNT - FEE));
    expect(await balance(t, `user.${LIMITED_RECIPIENT}.THB`)).toBe(BigInt(CREDIT_LIMIT));
    expect(await balance(t, 'system.revenue.THB')).toBe(revenueBefore + BigInt(FEE * (PAYERS.length + 3)));

    const { rows } = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM intents WHERE operation_type = 'P2P_TRANSFER' AND from_user_id = ANY($1)",
      [UNFUNDED],
    );
    expect(rows[0]!.n, 'refused payments leave no intent').toBe(0);
    await expectLedgerInvariants(t.db);

    const after = await batchSizes();
    // Every payment was part of a committed batch, refused ones included.
    expect(after.sum - before.sum).toBe(PAYERS.length + UNFUNDED.length + LIMITED_PAYERS.length);
    // Fewer transactions than payments: some were committed together.
    expect(after.count - before.count).toBeLessThan(after.sum - before.sum);
    // The refusals were answered by batches that lost their bet and ran again: the path above is
    // the lost bet's. PGlite's first batch bets on the closing statement too, and a refused
    // transfer loses it; PostgreSQL's bets only that every intent opens, which a limit loses.
    const lost = betsSince(betsBefore, await bets());
    expect(lost[`${t.db.kind === 'pglite' ? 'with-close' : 'with-open'} lost`]).toBeGreaterThanOrEqual(1);
  });

  it('a payment refused for funds as its intent is opened loses the bet that every intent opens: the next eight batches are sent without a bet, the ninth bets again', async () => {
    // One payment at a time: each is a batch of its own.
    const paySettled = async (n: number) => {
      for (let i = 0; i < n; i += 1) {
        const res = await pay(PAYERS[24 + (i % 6)]!, RECIPIENTS[24 + ((i + 1) % 6)]!, 3);
        expect(res.statusCode, res.body).toBe(201);
        expect(res.json().status).toBe('SETTLED');
      }
    };
    const boldest = t.db.kind === 'pglite' ? 'with-close' : 'with-open';
    await paySettled(8);

    let before = await bets();
    const refused = await pay(UNFUNDED[0]!, RECIPIENTS[24]!, 3);
    expect(refused.statusCode, refused.body).toBe(422);
    expect(refused.json().error).toBe('INSUFFICIENT_FUNDS');
    // The payer's funds are checked at the opening, as its limits are: its payment never opened,
    // and the batches after it send their ledger call once they know which payments did.
    expect(betsSince(before, await bets())).toEqual({ [`${boldest} lost`]: 1 });

    before = await bets();
    await paySettled(8);
    expect(betsSince(before, await bets()), 'sent without a bet').toEqual({ 'after-open none': 8 });
    before = await bets();
    await paySettled(1);
    expect(betsSince(before, await bets()), 'the ninth bets again').toEqual({ [`${boldest} won`]: 1 });

    expect(await balance(t, `user.${UNFUNDED[0]}.THB`)).toBe(0n);
    const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM intents WHERE from_user_id = $1', [UNFUNDED[0]]);
    expect(rows[0]!.n, 'the refused payment left no intent').toBe(0);
    await expectLedgerInvariants(t.db);
  });

  it('a replay loses the bet that every intent opens: the next eight batches are sent without a bet, the ninth bets again', async () => {
    const paySettled = async (n: number) => {
      for (let i = 0; i < n; i += 1) {
        const res = await pay(PAYERS[24 + (i % 6)]!, RECIPIENTS[24 + ((i + 1) % 6)]!, 3);
        expect(res.statusCode, res.body).toBe(201);
      }
    };
    const boldest = t.db.kind === 'pglite' ? 'with-close' : 'with-open';
    await paySettled(8);
    const body = intentBody({ operationType: 'P2P_TRANSFER', amount: 3, recipientUserId: RECIPIENTS[25]! });
    const first = await t.call('POST', '/intents', { user: PAYERS[24]!, body });
    expect(first.statusCode, first.body).toBe(201);
    const payerAfterFirst = await balance(t, `user.${PAYERS[24]}.THB`);

    let before = await bets();
    // A client whose answer was lost sends the payment again: its key is stored, so it does not open.
    const retry = await t.call('POST', '/intents', { user: PAYERS[24]!, body });
    expect(retry.statusCode, retry.body).toBe(200);
    expect(retry.json().intentId).toBe(first.json().intentId);
    expect(betsSince(before, await bets())).toEqual({ [`${boldest} lost`]: 1 });

    before = await bets();
    await paySettled(8);
    expect(betsSince(before, await bets()), 'sent without a bet').toEqual({ 'after-open none': 8 });
    before = await bets();
    await paySettled(1);
    expect(betsSince(before, await bets()), 'the ninth bets again').toEqual({ [`${boldest} won`]: 1 });

    // Three payments of its own since (the first and seventh of the eight, and the ninth), none for the replay.
    expect(await balance(t, `user.${PAYERS[24]}.THB`), 'the replay moved nothing').toBe(payerAfterFirst - 3n * (3n + BigInt(FEE)));
    await expectLedgerInvariants(t.db);
  });

  it('a payment refused as its intent is opened (a limit) moves no money; the payments batched with it settle', async () => {
    // On PostgreSQL the ledger call leaves with the opening statement, before its answer: this
    // batch's call carried the refused payment's transfers too, and must not stand.
    const fullRecipient = 300;
    await createUser(t, fullRecipient);
    expect((await pay(LIMITED_PAYERS[0]!, fullRecipient, CREDIT_LIMIT)).statusCode).toBe(201);
    const payers = PAYERS.slice(20, 24);
    const before = await Promise.all(payers.map((payer) => balance(t, `user.${payer}.THB`)));
    const refusedPayerBefore = await balance(t, `user.${LIMITED_PAYERS[1]}.THB`);
    burst.on = true;
    const [first, refused, ...others] = await Promise.all([
      pay(payers[0]!, RECIPIENTS[20]!, 11),
      pay(LIMITED_PAYERS[1]!, fullRecipient, 100),
      ...payers.slice(1).map((payer, i) => pay(payer, RECIPIENTS[21 + i]!, 11)),
    ]).finally(() => {
      burst.on = false;
    });
    expect(refused!.statusCode, refused!.body).toBe(422);
    expect(refused!.json().error).toBe('LIMIT_EXCEEDED');
    for (const res of [first!, ...others]) {
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().status).toBe('SETTLED');
    }
    expect(await balance(t, `user.${fullRecipient}.THB`)).toBe(BigInt(CREDIT_LIMIT));
    expect(await balance(t, `user.${LIMITED_PAYERS[1]}.THB`)).toBe(refusedPayerBefore);
    for (const [i, payer] of payers.entries()) expect(await balance(t, `user.${payer}.THB`)).toBe(before[i]! - BigInt(11 + FEE));
    await expectLedgerInvariants(t.db);
  });

  it('a batch that fails as a whole is committed again one by one: only the failing payment answers 500', async () => {
    const payers = PAYERS.slice(0, 10);
    burst.on = true;
    burst.poison = true;
    const answers = await Promise.all([
      pay(POISON_PAYER, POISON_RECIPIENT, Number(POISON_AMOUNT)),
      ...payers.map((payer, i) => pay(payer, RECIPIENTS[i]!, 7)),
    ]).finally(() => {
      burst.on = false;
      burst.poison = false;
    });
    await expectOnlyPoisonFailed(answers);
    for (const recipient of RECIPIENTS.slice(0, 10)) expect(await balance(t, `user.${recipient}.THB`)).toBe(BigInt(AMOUNT + 7));
  });

  it("a closing statement that fails (sent without waiting for it) takes the batch's money back with it; one by one, the others settle", async () => {
    // A real database error in the last statement of the batch (the history rows), which is sent
    // without waiting and answered together with COMMIT: the reservations made earlier in the
    // same transaction must go with it.
    await t.db.exec(`
      CREATE FUNCTION refuse_history_amount() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.amount = ${CLOSE_FAILURE_AMOUNT} THEN RAISE EXCEPTION 'injected history failure'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_history_amount BEFORE INSERT ON transactions FOR EACH ROW EXECUTE FUNCTION refuse_history_amount();`);
    const failing = intentBody({ operationType: 'P2P_TRANSFER', amount: CLOSE_FAILURE_AMOUNT, recipientUserId: POISON_RECIPIENT });
    const payers = PAYERS.slice(10, 20);
    const before = await Promise.all(payers.map((payer) => balance(t, `user.${payer}.THB`)));
    let answers: LightMyRequestResponse[];
    try {
      burst.on = true;
      answers = await Promise.all([
        t.call('POST', '/intents', { user: POISON_PAYER, body: failing }),
        ...payers.map((payer, i) => pay(payer, RECIPIENTS[10 + i]!, 9)),
      ]).finally(() => {
        burst.on = false;
      });
    } finally {
      await t.db.exec('DROP TRIGGER refuse_history_amount ON transactions; DROP FUNCTION refuse_history_amount();');
    }
    await expectOnlyPoisonFailed(answers);
    for (const [i, payer] of payers.entries()) expect(await balance(t, `user.${payer}.THB`)).toBe(before[i]! - BigInt(9 + FEE));

    // Retried with its key once the fault is gone, the payment settles once.
    const retried = await t.call('POST', '/intents', { user: POISON_PAYER, body: failing });
    expect(retried.statusCode, retried.body).toBe(201);
    expect(retried.json().status).toBe('SETTLED');
    expect(await balance(t, `user.${POISON_RECIPIENT}.THB`)).toBe(BigInt(CLOSE_FAILURE_AMOUNT));
    await expectLedgerInvariants(t.db);
  });

  it('a replay of a payment committed in a batch answers the stored intent', async () => {
    const body = intentBody({ operationType: 'P2P_TRANSFER', amount: 10, recipientUserId: RECIPIENTS[1]! });
    const [first, second] = await Promise.all([
      t.call('POST', '/intents', { user: PAYERS[1]!, body }),
      t.call('POST', '/intents', {
        user: PAYERS[2]!,
        body: intentBody({ operationType: 'P2P_TRANSFER', amount: 10, recipientUserId: RECIPIENTS[2]! }),
      }),
    ]);
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(201);
    const replay = await t.call('POST', '/intents', { user: PAYERS[1]!, body });
    expect(replay.statusCode).toBe(200);
    expect(replay.json().intentId).toBe(first.json().intentId);
    await expectLedgerInvariants(t.db);
  });
});
