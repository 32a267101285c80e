// The load generator: a process of its own, so that its CPU is not the server's event loop.
// Closed loop (a fixed number of requests in flight) measures saturation; open loop (requests
// sent at fixed times, whatever the answers do) measures latency, counted from the time a
// request was due rather than sent, so that queueing in front of a slow server shows up
// (coordinated omission) instead of quietly lowering the offered rate.
//
// node bench/load.js '<json options>'  → one JSON line on stdout.
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { ledgerAccountId } from '../dist/ledger/account-id.js';

/**
 * @typedef {object} LoadOptions
 * @property {string} url
 * @property {'p2p' | 'invoice' | 'policy' | 'bare' | 'refund'} kind
 * @property {'closed' | 'open'} mode
 * @property {number} [concurrency] closed loop: requests in flight; kind refund: also the number of originals refunded in turn
 * @property {number} [rate]
 * @property {number} [durationS]
 * @property {number} [warmupS]
 * @property {string} [service]
 * @property {string} secret
 * @property {[first: number, count: number]} users
 * @property {[first: number, count: number]} [merchants]
 * @property {number} [amount]
 * @property {number} [connectionsMax]
 * @property {number} [inFlightMax]
 * @property {Payees} [payees]
 * @property {Refusals} [refusals]
 * @property {Replays} [replays]
 */
/**
 * Retries of answered payments, closed loop only: of each worker's payments, the share `share`
 * (spread as refusals are) sends the worker's previous payment again, same key and body, as a
 * client does whose answer was lost: answered 200 with the stored intent, and nothing moves.
 * @typedef {{ share: number }} Replays
 */
/**
 * Payments the ledger refuses, closed loop only: of each worker's payments, the share `share`
 * (evenly spread, worker w's i-th when ⌊(i + w + 1)·share⌋ > ⌊(i + w)·share⌋) comes from a payer
 * of `payers` who was never funded and is never paid, and is answered 422 INSUFFICIENT_FUNDS.
 * Worker w pays from `payers`' w-th user, so `payers` needs one user per worker.
 * @typedef {{ share: number, payers: [first: number, count: number] }} Refusals
 */
/**
 * P2P recipients: absent, each payer pays the next users in turn (uniform over all of them);
 * `zipfS`, drawn by Zipf(s) over the first `count` users, so that a few payees take most
 * payments (s = 2.0 over 200: the first takes ~61 %), the hot-payee case.
 * @typedef {{ zipfS: number, count: number }} Payees
 */
/** @typedef {{ p50: number | null, p90: number | null, p99: number | null, p999: number | null, max: number | null }} Latencies */
/**
 * What one run prints: its JSON line on stdout.
 * @typedef {object} LoadResult
 * @property {LoadOptions['kind']} kind
 * @property {LoadOptions['mode']} mode
 * @property {number | null} concurrency
 * @property {number | null} offeredPerS
 * @property {Payees | null} [payees]
 * @property {number} [refusedShare] with `refusals`: the share of payments sent to be refused
 * @property {number} [refused] with `refusals`: payments answered 422 INSUFFICIENT_FUNDS, as they should be (not in `ok` or `errors`)
 * @property {number} [refusedPerS]
 * @property {number} [replayShare] with `replays`: the share of requests sent as retries
 * @property {number} [replayed] with `replays`: retries answered 200 replayed, as they should be (not in `ok` or `errors`)
 * @property {number} [replayedPerS]
 * @property {number} durationS
 * @property {number} ok
 * @property {number} throughputPerS
 * @property {Record<string, number>} errors
 * @property {Latencies} latencyMs
 * @property {{ dueAt: string, ms: number }[]} slowest the slowest requests, by the time they were due
 * @property {{ p99: number, max: number }} generatorEventLoopDelayMs the generator's own loop's delay over the measured window
 */

/** The slowest requests reported with their due times, to be matched with the server's and the machine's records. */
const SLOWEST_REPORTED = 10;

/** @type {LoadOptions} */
const opts = JSON.parse(process.argv[2] ?? '{}');
const {
  url,
  kind, // 'p2p' | 'invoice' | 'policy' | 'bare' | 'refund'
  mode, // 'closed' | 'open'
  concurrency = 32,
  rate = 500,
  durationS = 20,
  warmupS = 3,
  service = 'wallet-api',
  secret,
  users, // [first, count]
  merchants = [0, 0],
  amount = 100,
  connectionsMax = 256,
  // Past this many requests waiting, an overloaded server would only grow the queue (and the
  // run's length) without telling more: later requests are counted as dropped, not sent.
  inFlightMax = 2_000,
  payees,
  refusals,
  replays,
} = opts;
const [firstUser, userCount] = users;
const [firstMerchant, merchantCount] = merchants;

const pool = new Pool(url, { connections: mode === 'closed' ? concurrency : connectionsMax, pipelining: 1, keepAliveTimeout: 60_000 });

/**
 * Rank k (0-based) drawn with probability (k + 1)^-s / Σ: by bisection over the cumulative sums.
 * @param {Payees} zipf
 * @returns {() => number}
 */
function zipfSampler({ zipfS, count }) {
  /** @type {number[]} */
  const cumulative = [];
  let sum = 0;
  for (let k = 1; k <= count; k++) {
    sum += k ** -zipfS;
    cumulative.push(sum);
  }
  return () => {
    const target = Math.random() * sum;
    let low = 0;
    let high = count - 1;
    while (low < high) {
      const mid = (low + high) >> 1;
      if ((cumulative[mid] ?? sum) < target) low = mid + 1;
      else high = mid;
    }
    return low;
  };
}
const drawHotPayee = payees === undefined ? null : zipfSampler(payees);
if (refusals !== undefined && (kind !== 'p2p' || mode !== 'closed' || refusals.payers[1] < concurrency))
  throw new Error('refusals: P2P in a closed loop, with a refused payer per worker');
/** A refused payment's answer: counted apart from the settled ones and the errors. */
const REFUSED = 'refused';
if (replays !== undefined && (kind !== 'p2p' || mode !== 'closed')) throw new Error('replays: P2P in a closed loop');
/** A retry's answer: counted apart from the settled ones and the errors. */
const REPLAYED = 'replayed';
/** @typedef {{ u: number, payload: object }} Sent */

/**
 * Sends a payment again, as a client whose answer was lost does.
 * @param {Sent} sent
 * @returns {Promise<string>}
 */
async function retry({ u, payload }) {
  const r = await post('/intents', payload, u);
  return r.status === 200 && r.text.includes('"SETTLED"') ? REPLAYED : `replay_${r.status}:${r.text.slice(0, 60)}`;
}

/**
 * @param {number} u payer
 * @param {number} n
 */
function recipientOf(u, n) {
  if (drawHotPayee === null) return firstUser + ((u - firstUser + 1 + (n % (userCount - 1))) % userCount);
  // A payer never pays itself: a draw of the payer is drawn again.
  for (;;) {
    const to = firstUser + drawHotPayee();
    if (to !== u) return to;
  }
}

/** @param {string} body */
const sha256Hex = (body) => createHash('sha256').update(body).digest('hex');
/**
 * @param {string} method
 * @param {string} path
 * @param {string} body
 * @param {number} [userId]
 */
function headers(method, path, body, userId) {
  const ts = String(Math.floor(Date.now() / 1000));
  const signature = createHmac('sha256', secret)
    .update(`${ts}\n${method}\n${path}\n${sha256Hex(body)}`)
    .digest('hex');
  /** @type {Record<string, string>} */
  const h = { 'content-type': 'application/json', 'x-service-id': service, 'x-timestamp': ts, 'x-signature': signature };
  if (userId !== undefined) h['x-user-id'] = String(userId);
  return h;
}

/**
 * @param {string} path
 * @param {object} payload
 * @param {number} [userId]
 */
async function post(path, payload, userId) {
  const body = JSON.stringify(payload);
  const res = await pool.request({ method: 'POST', path, body, headers: headers('POST', path, body, userId) });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}

/**
 * kind 'refund' (bench/refunds.js): each worker's current original payment, of `amount` times
 * REFUND_ORIGINAL_SHARES, and what it still has to refund; each unit refunds `amount` of it, and
 * a payer whose original is used up pays a new one first (one unit in a thousand).
 * @type {Map<number, { id: string, left: number }>}
 */
const originals = new Map();
const REFUND_ORIGINAL_SHARES = 1_000;

/**
 * One unit of work for payer `u` (and recipient / merchant); resolves to an error code or null.
 * @param {number} u
 * @param {number} n
 * @param {(sent: Sent) => void} [remember] told each P2P payment sent
 * @returns {Promise<string | null>}
 */
async function work(u, n, remember) {
  switch (kind) {
    case 'p2p':
    case 'bare': {
      const to = recipientOf(u, n);
      const payload = { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount, currency: 'THB', recipientUserId: to };
      remember?.({ u, payload });
      const r = await post(kind === 'bare' ? '/bare' : '/intents', payload, u);
      if (kind === 'bare') return r.status === 200 ? null : `http_${r.status}`;
      if (refusals !== undefined && u >= refusals.payers[0] && u < refusals.payers[0] + refusals.payers[1]) {
        return r.status === 422 && r.text.includes('"INSUFFICIENT_FUNDS"') ? REFUSED : `refused_payer_${r.status}:${r.text.slice(0, 60)}`;
      }
      if (r.status !== 201) return `http_${r.status}:${r.text.slice(0, 60)}`;
      return r.text.includes('"SETTLED"') ? null : 'not_settled';
    }
    case 'invoice': {
      const merchant = firstMerchant + (n % merchantCount);
      const issue = await post(
        '/intents',
        {
          idempotencyKey: randomUUID(),
          operationType: 'INVOICE_PAYMENT',
          amount,
          currency: 'THB',
          toLedgerAccountId: ledgerAccountId(`merchant.${merchant}.THB`),
        },
        merchant,
      );
      if (issue.status !== 201) return `issue_${issue.status}:${issue.text.slice(0, 60)}`;
      const { intentId } = JSON.parse(issue.text);
      const confirm = await post(
        `/intents/${intentId}/confirm`,
        { payerLedgerAccountId: ledgerAccountId(`user.${u}.THB`), payerUserId: u, idempotencyKey: randomUUID() },
        u,
      );
      if (confirm.status !== 200) return `confirm_${confirm.status}:${confirm.text.slice(0, 60)}`;
      return confirm.text.includes('"SETTLED"') ? null : 'not_settled';
    }
    case 'refund': {
      // One original per closed-loop worker (a worker's payers rotate): refunds, not new payments, are measured.
      const slot = (u - firstUser) % concurrency;
      let original = originals.get(slot);
      if (original === undefined || original.left < amount) {
        const payload = {
          idempotencyKey: randomUUID(),
          operationType: 'P2P_TRANSFER',
          amount: amount * REFUND_ORIGINAL_SHARES,
          currency: 'THB',
          recipientUserId: recipientOf(u, n),
        };
        const paid = await post('/intents', payload, u);
        if (paid.status !== 201) return `original_${paid.status}:${paid.text.slice(0, 60)}`;
        original = { id: JSON.parse(paid.text).intentId, left: amount * REFUND_ORIGINAL_SHARES };
        originals.set(slot, original);
      }
      original.left -= amount;
      const r = await post(`/intents/${original.id}/refunds`, { idempotencyKey: randomUUID(), amount, reason: 'bench' }, u);
      if (r.status !== 201) return `refund_${r.status}:${r.text.slice(0, 60)}`;
      return r.text.includes('"SETTLED"') ? null : 'not_settled';
    }
    case 'policy': {
      const merchant = 1 + (n % 1000);
      const r = await post('/policies/evaluate', {
        userId: u,
        merchantId: merchant,
        amount: String(amount * (1 + (n % 500))),
        currency: 'THB',
        channel: 'INTERNAL_P2P',
        appId: `app-${n % 10}`,
        operationType: 'P2P_TRANSFER',
      });
      return r.status === 200 ? null : `http_${r.status}`;
    }
    default:
      throw new Error(`unknown kind ${kind}`);
  }
}

/** @type {number[]} */
const latenciesMs = [];
/** Each measured request's due time (ms since the epoch) and latency, for the slowest's timestamps. */
/** @type {{ dueAtMs: number, ms: number }[]} */
const timed = [];
// The generator shares the machine's two cores: a stall of its own loop delays the requests it
// sends, and is counted in their latency (from their due time), so it is reported beside them.
const generatorDelay = monitorEventLoopDelay({ resolution: 5 });
/** @type {Record<string, number>} */
const errors = {};
let measuredOk = 0;
let measuredRefused = 0;
let measuredReplayed = 0;
let sent = 0;
const start = performance.now();
const warmEnd = start + warmupS * 1000;
const end = warmEnd + durationS * 1000;
generatorDelay.enable();
setTimeout(() => generatorDelay.reset(), warmupS * 1000).unref();

/**
 * @param {number} dueAt
 * @param {string | null} error
 */
function record(dueAt, error) {
  const doneAt = performance.now();
  if (dueAt < warmEnd) return;
  if (error === REFUSED) measuredRefused++;
  else if (error === REPLAYED) measuredReplayed++;
  else if (error !== null) errors[error] = (errors[error] ?? 0) + 1;
  else {
    measuredOk++;
    latenciesMs.push(doneAt - dueAt);
    timed.push({ dueAtMs: performance.timeOrigin + dueAt, ms: doneAt - dueAt });
  }
}

async function closedLoop() {
  // Worker w owns payers w, w + C, w + 2C, …: no payer has two payments in flight (docs/rules.md R22 would 409).
  const perWorker = Math.floor(userCount / concurrency);
  if (perWorker < 1) throw new Error('fewer users than workers');
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      /** @type {Sent | null} */
      let previous = null;
      const remember = (/** @type {Sent} */ payment) => {
        previous = payment;
      };
      // Worker w's i-th request takes a share's turn when ⌊(i + w + 1)·share⌋ > ⌊(i + w)·share⌋.
      const turn = (/** @type {number} */ share, /** @type {number} */ i) => Math.floor((i + w + 1) * share) > Math.floor((i + w) * share);
      for (let i = 0; performance.now() < end; i++) {
        const refused = refusals !== undefined && turn(refusals.share, i);
        const u = refused ? refusals.payers[0] + w : firstUser + w + concurrency * (i % perWorker);
        const dueAt = performance.now();
        sent++;
        const answer = previous !== null && replays !== undefined && turn(replays.share, i) ? retry(previous) : work(u, sent, remember);
        record(dueAt, await answer.catch((e) => `exception:${e.code ?? e.message}`));
      }
    }),
  );
}

async function openLoop() {
  const intervalMs = 1000 / rate;
  /** @type {Set<Promise<void>>} */
  const inFlight = new Set();
  let k = 0;
  // Payers round-robin over the whole pool: a payer comes back every userCount / rate seconds.
  while (true) {
    const now = performance.now();
    if (now >= end) break;
    for (let due = start + k * intervalMs; due <= now; due = start + k * intervalMs) {
      const u = firstUser + (k % userCount);
      const n = k++;
      if (inFlight.size >= inFlightMax) {
        if (due >= warmEnd) errors.dropped_overload = (errors.dropped_overload ?? 0) + 1;
        continue;
      }
      sent++;
      const p = work(u, n)
        .catch((e) => `exception:${e.code ?? e.message}`)
        .then((error) => record(due, error));
      inFlight.add(p);
      p.finally(() => inFlight.delete(p));
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(inFlight);
}

/**
 * @param {readonly number[]} sorted
 * @param {number} p
 */
const pct = (sorted, p) => (sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]);
await (mode === 'closed' ? closedLoop() : openLoop());
const elapsedS = (performance.now() - warmEnd) / 1000;
latenciesMs.sort((a, b) => a - b);
generatorDelay.disable();
/** Milliseconds from the histogram's nanoseconds. */
/** @param {number} ns */
const ms = (ns) => Math.round(ns / 1e4) / 100;
const slowest = timed
  .sort((a, b) => b.ms - a.ms)
  .slice(0, SLOWEST_REPORTED)
  .map((x) => ({ dueAt: new Date(x.dueAtMs).toISOString(), ms: Math.round(x.ms * 10) / 10 }));
/** @param {number | null | undefined} x */
const round = (x) => (x === null || x === undefined ? null : Math.round(x * 100) / 100);
process.stdout.write(
  `${JSON.stringify({
    kind,
    mode,
    concurrency: mode === 'closed' ? concurrency : null,
    payees: payees ?? null,
    ...(refusals === undefined
      ? {}
      : { refusedShare: refusals.share, refused: measuredRefused, refusedPerS: Math.round(measuredRefused / elapsedS) }),
    ...(replays === undefined
      ? {}
      : { replayShare: replays.share, replayed: measuredReplayed, replayedPerS: Math.round(measuredReplayed / elapsedS) }),
    offeredPerS: mode === 'open' ? rate : null,
    durationS: Math.round(elapsedS * 10) / 10,
    ok: measuredOk,
    throughputPerS: Math.round(measuredOk / elapsedS),
    errors,
    latencyMs: {
      p50: round(pct(latenciesMs, 50)),
      p90: round(pct(latenciesMs, 90)),
      p99: round(pct(latenciesMs, 99)),
      p999: round(pct(latenciesMs, 99.9)),
      max: round(latenciesMs.at(-1) ?? null),
    },
    slowest,
    generatorEventLoopDelayMs: { p99: ms(generatorDelay.percentile(99)), max: ms(generatorDelay.max) },
  })}\n`,
);
await pool.close();
