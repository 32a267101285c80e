import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { assertNever } from '../../assert-never.js';

/**
 * A PSPX provider that speaks the wire contract of pspx-client.ts over real HTTP, so that the
 * service always runs its production client. The receiver account's last four digits choose the
 * outcome (docs/rules.md, Simulator outcomes):
 *   9999 inquiry rejects · 9998 confirm times out, every status inquiry answers pending ·
 *   9997 confirm times out, the first status inquiry completes · else everything succeeds.
 * "Times out" is real: the confirm answer is held for `confirmHoldMs`, longer than the client waits.
 */
export type Scenario = 'inquiry_rejects' | 'confirm_times_out_stays_pending' | 'confirm_times_out_then_completes' | 'succeeds';

export function scenarioOf(receiverAccount: string): Scenario {
  if (receiverAccount.endsWith('9999')) return 'inquiry_rejects';
  if (receiverAccount.endsWith('9998')) return 'confirm_times_out_stays_pending';
  if (receiverAccount.endsWith('9997')) return 'confirm_times_out_then_completes';
  return 'succeeds';
}

const bangkokDate = new Intl.DateTimeFormat('en-CA', { timeZone: 'Asia/Bangkok', year: 'numeric', month: '2-digit', day: '2-digit' });

/** Today in Asia/Bangkok as YYYYMMDD, the provider's settlement calendar. */
export function bangkokSettlementDate(at: Date = new Date()): string {
  const parts = Object.fromEntries(bangkokDate.formatToParts(at).map((p) => [p.type, p.value]));
  return `${parts.year}${parts.month}${parts.day}`;
}

type PayoutStatus = 'INQUIRED' | 'INQUIRY_REJECTED' | 'PENDING' | 'COMPLETED' | 'FAILED';

interface Payout {
  readonly scenario: Scenario;
  readonly amount: bigint;
  /** The inquiry parameters: a repeat with others is a conflict, not a second payout. */
  readonly fingerprint: string;
  readonly inquiryRef: string;
  status: PayoutStatus;
  reason: string | null;
  settlementDate: string | null;
  confirmsReceived: number;
  paid: boolean;
}

export interface SimulatorOptions {
  readonly initialBalance?: bigint;
  /** How long a "timing out" confirm is held before the provider answers PENDING. */
  readonly confirmHoldMs?: number;
  readonly random?: () => number;
  /**
   * Runs before each partner-balance answer, so that money the provider moved by other rails
   * (bookRailsMovement) is in the balance it reports. Failing, the answer is 503.
   */
  readonly beforeBalance?: () => Promise<void>;
}

export interface SimulatorStats {
  readonly requests: number;
  readonly inquiries: number;
  readonly confirms: number;
  readonly statusInquiries: number;
  readonly registrations: number;
  readonly walletsCreated: number;
  readonly payoutsPaid: number;
  readonly failuresInjected: number;
}

type Answer = { readonly status: number; readonly body: Record<string, unknown>; readonly holdMs?: number };

const SIMULATOR_DEFAULTS = { initialBalance: 100_000_000n, confirmHoldMs: 30_000 } as const;

/** The provider's state and rules, apart from HTTP so that each rule reads as one function. */
export class PspxSimulator {
  private balanceSatang: bigint;
  private readonly payouts = new Map<string, Payout>();
  private readonly wallets = new Map<string, string>();
  private readonly railsMovements = new Set<string>();
  private readonly counters = {
    requests: 0,
    inquiries: 0,
    confirms: 0,
    statusInquiries: 0,
    registrations: 0,
    payoutsPaid: 0,
    failuresInjected: 0,
  };
  private delayMs = 0;
  private failureRate = 0;
  private failNextCount = 0;
  readonly confirmHoldMs: number;
  private readonly random: () => number;

  constructor(options: SimulatorOptions = {}) {
    this.balanceSatang = options.initialBalance ?? SIMULATOR_DEFAULTS.initialBalance;
    this.confirmHoldMs = options.confirmHoldMs ?? SIMULATOR_DEFAULTS.confirmHoldMs;
    this.random = options.random ?? Math.random;
  }

  // Fault knobs for chaos tests.
  setDelayMs(ms: number): void {
    this.delayMs = Math.max(0, ms);
  }
  setFailureRate(rate: number): void {
    this.failureRate = Math.min(1, Math.max(0, rate));
  }
  /** The next `count` requests answer 503 before any processing: deterministic where setFailureRate is not. */
  failNext(count: number): void {
    this.failNextCount = Math.max(0, count);
  }
  get currentDelayMs(): number {
    return this.delayMs;
  }

  get balance(): bigint {
    return this.balanceSatang;
  }
  get stats(): SimulatorStats {
    return { ...this.counters, walletsCreated: this.wallets.size };
  }
  confirmsReceived(intentId: string): number {
    return this.payouts.get(intentId)?.confirmsReceived ?? 0;
  }
  /** 1 when the provider paid the intent, else 0: never more, whatever was sent. */
  payoutsMade(intentId: string): number {
    return this.payouts.get(intentId)?.paid === true ? 1 : 0;
  }
  /** Per intent: confirms received and whether it was paid; what a chaos run checks from outside. */
  payoutReport(): Record<string, { readonly confirms: number; readonly paid: boolean }> {
    return Object.fromEntries([...this.payouts].map(([id, p]) => [id, { confirms: p.confirmsReceived, paid: p.paid }]));
  }

  /** True when this request must fail with 503 (an injected fault); counted. */
  injectFault(): boolean {
    this.counters.requests += 1;
    const fail = this.failNextCount > 0 || (this.failureRate > 0 && this.random() < this.failureRate);
    if (this.failNextCount > 0) this.failNextCount -= 1;
    if (fail) this.counters.failuresInjected += 1;
    return fail;
  }

  registerWallet(idempotencyKey: string | undefined, customer: Record<string, unknown>): Answer {
    this.counters.registrations += 1;
    if (idempotencyKey === undefined || idempotencyKey === '') return { status: 400, body: { reason: 'missing Idempotency-Key' } };
    if (typeof customer.senderTaxId !== 'string' || !/^[0-9]{13}$/.test(customer.senderTaxId)) {
      return { status: 422, body: { reason: 'senderTaxId must have 13 digits' } };
    }
    let walletId = this.wallets.get(idempotencyKey);
    if (walletId === undefined) {
      walletId = `PSPXW-${randomUUID()}`;
      this.wallets.set(idempotencyKey, walletId);
    }
    return { status: 200, body: { walletId } };
  }

  inquiry(intentId: string, request: Record<string, unknown>): Answer {
    this.counters.inquiries += 1;
    const { amount, receiverAccount } = request;
    if (typeof amount !== 'string' || !/^[1-9][0-9]{0,18}$/.test(amount) || typeof receiverAccount !== 'string') {
      return { status: 400, body: { reason: 'amount (digits) and receiverAccount are required' } };
    }
    const fingerprint = createHash('sha256')
      .update(JSON.stringify([amount, request.currency, request.receiverType, receiverAccount, request.receiverBank]))
      .digest('hex');
    let payout = this.payouts.get(intentId);
    if (payout === undefined) {
      const scenario = scenarioOf(receiverAccount);
      const rejected = scenario === 'inquiry_rejects';
      payout = {
        scenario,
        amount: BigInt(amount),
        fingerprint,
        inquiryRef: `INQ-${createHash('sha256').update(intentId).digest('hex').slice(0, 16)}`,
        status: rejected ? 'INQUIRY_REJECTED' : 'INQUIRED',
        reason: rejected ? 'receiver_rejected' : null,
        settlementDate: null,
        confirmsReceived: 0,
        paid: false,
      };
      this.payouts.set(intentId, payout);
    } else if (payout.fingerprint !== fingerprint) {
      return { status: 409, body: { reason: 'intent_parameters_mismatch' } };
    }
    if (payout.status === 'INQUIRY_REJECTED') return { status: 200, body: { result: 'REJECTED', reason: payout.reason } };
    return { status: 200, body: { result: 'OK', inquiryRef: payout.inquiryRef } };
  }

  confirm(intentId: string, inquiryRef: unknown): Answer {
    this.counters.confirms += 1;
    const payout = this.payouts.get(intentId);
    if (payout === undefined || payout.inquiryRef !== inquiryRef) {
      return { status: 200, body: { result: 'REJECTED', reason: 'unknown_inquiry' } };
    }
    payout.confirmsReceived += 1;
    if (payout.status === 'INQUIRED') this.acceptConfirm(payout);
    return this.confirmAnswer(payout);
  }

  statusInquiry(intentId: string): Answer {
    this.counters.statusInquiries += 1;
    const payout = this.payouts.get(intentId);
    if (payout === undefined || payout.status === 'INQUIRED') return { status: 404, body: { reason: 'no_payout_for_intent' } };
    if (payout.status === 'PENDING' && payout.scenario === 'confirm_times_out_then_completes') this.settle(payout);
    switch (payout.status) {
      case 'COMPLETED':
        return { status: 200, body: { status: 'COMPLETED', settlementDate: payout.settlementDate } };
      case 'PENDING':
        return { status: 200, body: { status: 'PENDING' } };
      case 'FAILED':
      case 'INQUIRY_REJECTED':
        return { status: 200, body: { status: 'FAILED', reason: payout.reason } };
      default:
        return assertNever(payout.status);
    }
  }

  /**
   * Money that entered or left the partner account by rails other than this API: a customer's
   * QR top-up paid in (positive), a withdrawal paid out to the customer's bank (negative). Each
   * reference counts once, however often it is booked.
   */
  bookRailsMovement(reference: string, partnerDeltaSatang: bigint): void {
    if (this.railsMovements.has(reference)) return;
    this.railsMovements.add(reference);
    this.balanceSatang += partnerDeltaSatang;
  }

  partnerBalance(): Answer {
    return { status: 200, body: { balance: this.balanceSatang.toString() } };
  }

  /** The first confirm of an intent decides its fate; later ones only read it. */
  private acceptConfirm(payout: Payout): void {
    switch (payout.scenario) {
      case 'succeeds':
        this.settle(payout);
        return;
      case 'confirm_times_out_stays_pending':
      case 'confirm_times_out_then_completes':
        payout.status = 'PENDING';
        return;
      case 'inquiry_rejects':
        // Unreachable: its inquiry was rejected, so its status never became INQUIRED.
        throw new Error('confirm accepted for a rejected inquiry');
      default:
        assertNever(payout.scenario);
    }
  }

  private settle(payout: Payout): void {
    if (this.balanceSatang < payout.amount) {
      payout.status = 'FAILED';
      payout.reason = 'insufficient_partner_balance';
      return;
    }
    this.balanceSatang -= payout.amount;
    payout.paid = true;
    payout.status = 'COMPLETED';
    payout.settlementDate = bangkokSettlementDate();
    this.counters.payoutsPaid += 1;
  }

  private confirmAnswer(payout: Payout): Answer {
    switch (payout.status) {
      case 'COMPLETED':
        return { status: 200, body: { result: 'COMPLETED', settlementDate: payout.settlementDate } };
      case 'PENDING':
        return { status: 200, body: { result: 'PENDING' }, holdMs: this.confirmHoldMs };
      case 'FAILED':
      case 'INQUIRY_REJECTED':
        return { status: 200, body: { result: 'REJECTED', reason: payout.reason } };
      case 'INQUIRED':
        throw new Error('a confirmed payout is never left INQUIRED');
      default:
        return assertNever(payout.status);
    }
  }
}

export interface SimulatorServer {
  readonly url: string;
  readonly simulator: PspxSimulator;
  close(): Promise<void>;
}

/**
 * Listens on 127.0.0.1 (port 0: an ephemeral one unless given). Held confirms end at close, so a
 * test run or a shutdown never waits for them.
 */
export async function createSimulatorServer(
  options: SimulatorOptions & { port?: number; host?: string; adminRoutes?: boolean } = {},
): Promise<SimulatorServer> {
  const simulator = new PspxSimulator(options);
  const closing = new AbortController();
  const app = buildSimulatorApp(simulator, closing.signal, options.beforeBalance);
  if (options.adminRoutes === true) simulatorAdminRoutes(app, simulator);
  const url = await app.listen({ port: options.port ?? 0, host: options.host ?? '127.0.0.1' });
  return {
    url,
    simulator,
    async close() {
      closing.abort();
      await app.close();
    },
  };
}

/** A JSON body's fields; anything else reads as no fields, as a lenient provider would. */
const body = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.fromEntries(Object.entries(value)) : {};

function buildSimulatorApp(simulator: PspxSimulator, closing: AbortSignal, beforeBalance?: () => Promise<void>): FastifyInstance {
  const app = Fastify({ logger: false, forceCloseConnections: true });

  const send = async (reply: FastifyReply, produce: () => Answer) => {
    // Drawn on arrival, so failNext(n) hits the next n requests to arrive, not slow ones still in flight.
    const faulted = simulator.injectFault();
    if (simulator.currentDelayMs > 0) await pause(simulator.currentDelayMs, closing);
    if (faulted) return reply.status(503).send({ reason: 'injected_failure' });
    const answer = produce();
    if (answer.holdMs !== undefined) await pause(answer.holdMs, closing);
    return reply.status(answer.status).send(answer.body);
  };

  /** The provider's routes are unchecked on purpose (the simulator answers what PSPX would); the path names the payout. */
  type PayoutParams = { intentId: string };
  app.post('/v1/wallets', (request, reply) => {
    const key = request.headers['idempotency-key'];
    return send(reply, () => simulator.registerWallet(typeof key === 'string' ? key : undefined, body(request.body)));
  });
  app.post<{ Params: PayoutParams }>('/v1/payouts/:intentId/inquiry', (request, reply) =>
    send(reply, () => simulator.inquiry(request.params.intentId, body(request.body))),
  );
  app.post<{ Params: PayoutParams }>('/v1/payouts/:intentId/confirm', (request, reply) =>
    send(reply, () => simulator.confirm(request.params.intentId, body(request.body).inquiryRef)),
  );
  app.get<{ Params: PayoutParams }>('/v1/payouts/:intentId', (request, reply) =>
    send(reply, () => simulator.statusInquiry(request.params.intentId)),
  );
  app.get('/v1/partner/balance', async (_request, reply) => {
    try {
      await beforeBalance?.();
    } catch {
      return reply.status(503).send({ reason: 'rails_feed_unavailable' });
    }
    return send(reply, () => simulator.partnerBalance());
  });
  return app;
}

/**
 * Knobs and counters over HTTP, for a simulator in a process of its own (a chaos run turns the
 * knobs while payorch restarts, and the counters outlive those restarts). Loopback only, opt-in
 * (PSPX_SIM_ADMIN=1): a real provider has nothing like it. Never slowed or failed by the knobs.
 */
function simulatorAdminRoutes(app: FastifyInstance, simulator: PspxSimulator): void {
  const finite = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
  app.post('/_sim/knobs', async (request) => {
    const knobs = body(request.body);
    const delayMs = finite(knobs.delayMs);
    const failureRate = finite(knobs.failureRate);
    const failNext = finite(knobs.failNext);
    if (delayMs !== undefined) simulator.setDelayMs(delayMs);
    if (failureRate !== undefined) simulator.setFailureRate(failureRate);
    if (failNext !== undefined) simulator.failNext(failNext);
    return { delayMs: simulator.currentDelayMs };
  });
  app.get('/_sim/stats', async () => ({
    stats: simulator.stats,
    balance: simulator.balance.toString(),
    payouts: simulator.payoutReport(),
  }));
}

/** Waits `ms`, or less when the server closes. */
async function pause(ms: number, closing: AbortSignal): Promise<void> {
  try {
    await sleep(ms, undefined, { signal: closing });
  } catch {
    // Aborted by close: answer at once; the socket is going away anyway.
  }
}
