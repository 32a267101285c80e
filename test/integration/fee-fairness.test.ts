import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FEE_WALL_LIMIT_MS } from '../../src/domain/rules/fees/index.js';
import { demoConfigFile, startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, intentBody, topUp } from '../support/payments.js';

/**
 * docs/rules.md R61: one service's fee evaluations cannot delay another service's payments by more
 * than one evaluation limit. A key with no permissions at all floods POST /intents/quote with
 * requests whose fee rule runs until it is cut at the wall limit; a payment of another service,
 * whose own fee rule is quick, is answered meanwhile, not after the flood.
 */

const PAYER = 8901;
const PAYEE = 8902;
/** Each one holds a fee worker for the whole wall limit: on a pool served first come, first served, the payment would wait for all of them. */
const SLOW_QUOTES = 60;
/** The ruling's bound is one evaluation limit; the rest is room for a loaded machine. Served in arrival order it would be seconds. */
const PAYMENT_DELAY_MS_MAX = FEE_WALL_LIMIT_MS + 900;

let t: TestApp;

beforeAll(async () => {
  const file = demoConfigFile();
  t = await startTestApp({
    file: {
      ...file,
      limitRules: [],
      feeRules: [
        {
          name: 'slow when asked',
          operationType: 'P2P_TRANSFER',
          expression: "metadata.slow ? (() => { for (;;) {} })() : [{account: 'system.revenue.THB', amount: 1}]",
          timing: 'PRE',
        },
      ],
    },
  });
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await topUp(t, PAYER, 1_000_000);
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

const pay = () =>
  t.call('POST', '/intents', { user: PAYER, body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: PAYEE }) });

async function timed<T>(work: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = performance.now();
  const result = await work();
  return { result, ms: performance.now() - started };
}

describe('fee evaluation shared fairly between services', () => {
  it(`a payment is answered within one evaluation limit while another key's ${SLOW_QUOTES} slow quotes wait`, async () => {
    const quiet = await timed(pay);
    expect(quiet.result.statusCode, quiet.result.body).toBe(201);

    let quotesDone = 0;
    const quotes = Array.from({ length: SLOW_QUOTES }, () =>
      t
        .call('POST', '/intents/quote', {
          service: 'mobile-gateway',
          body: { operationType: 'P2P_TRANSFER', amount: 100, metadata: { slow: true } },
        })
        .then((res) => {
          quotesDone += 1;
          return res;
        }),
    );
    // Let the flood reach the workers first.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const busy = await timed(pay);
    expect(busy.result.statusCode, busy.result.body).toBe(201);
    expect(busy.ms - quiet.ms).toBeLessThan(PAYMENT_DELAY_MS_MAX);
    expect(quotesDone).toBeLessThan(SLOW_QUOTES / 2);

    const answers = await Promise.all(quotes);
    // Every slow quote was cut at the wall limit and said so; none was dropped or answered 5xx.
    expect(new Set(answers.map((res) => res.statusCode))).toEqual(new Set([422]));
    expect(answers.every((res) => res.json().error === 'EVAL_ERROR')).toBe(true);
  }, 60_000);
});
