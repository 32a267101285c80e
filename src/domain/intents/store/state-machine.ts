import assert from 'node:assert/strict';
import { INTENT_STATUSES, type IntentStatus } from '../../model.js';

/**
 * The intent state machine (docs/rules.md, Transitions) as data, so that the
 * code that moves an intent and the audit that checks its trail read one table.
 *
 * SETTLING has no row on purpose: docs/rules.md R7 reserves it (accepted wherever a status is read) but no
 * current channel enters it, so an entry in an audit trail is a bug. A channel that starts using
 * it adds its rows here.
 */
export interface StatusTransition {
  /** null only for the creation event. */
  readonly from: IntentStatus | null;
  readonly to: IntentStatus;
}

export const ALLOWED_TRANSITIONS: readonly StatusTransition[] = [
  { from: null, to: 'CREATED' },
  // Single-phase create, and an invoice's confirm.
  { from: 'CREATED', to: 'VALIDATED' },
  { from: 'VALIDATED', to: 'AUTHORIZED' },
  { from: 'AUTHORIZED', to: 'SETTLED' },
  // docs/rules.md R27: a confirm refused for funds or limits fails before anything is reserved.
  { from: 'VALIDATED', to: 'FAILED' },
  // Redeem refused, a void_pending job, the PSP worker, or startup reconciliation.
  { from: 'AUTHORIZED', to: 'FAILED' },
  // Startup reconciliation of an intent stuck before its reservation.
  { from: 'CREATED', to: 'FAILED' },
  // The invoice lifecycle without a payer.
  { from: 'CREATED', to: 'CANCELED' },
  { from: 'CREATED', to: 'EXPIRED' },
  // PSP worker escalation, then the admin resolve (through post_pending / void_pending jobs).
  { from: 'AUTHORIZED', to: 'MANUAL_REVIEW' },
  { from: 'MANUAL_REVIEW', to: 'SETTLED' },
  { from: 'MANUAL_REVIEW', to: 'FAILED' },
];

const allowedKeys = new Set(ALLOWED_TRANSITIONS.map((t) => `${t.from ?? ''}>${t.to}`));

export function isAllowedTransition(from: IntentStatus | null, to: IntentStatus): boolean {
  return allowedKeys.has(`${from ?? ''}>${to}`);
}

/**
 * Where each status stands in the order every move goes up: the length of the longest trail that
 * reaches it through ALLOWED_TRANSITIONS. Every allowed step therefore climbs, so a status seen
 * after a higher one of the same intent is a late message about a step it already passed (the
 * live stream and `payorch watch` drop it). SETTLING, which no transition enters (R7), ranks -1:
 * no trail holds it.
 */
export const STATUS_RANK: Readonly<Record<IntentStatus, number>> = rankStatuses();

function rankStatuses(): Record<IntentStatus, number> {
  const rank = Object.fromEntries(INTENT_STATUSES.map((status) => [status, -1])) as Record<IntentStatus, number>;
  // Longest paths in a graph without circles: as many rounds as there are statuses settle every one.
  for (const _ of INTENT_STATUSES) {
    for (const { from, to } of ALLOWED_TRANSITIONS) rank[to] = Math.max(rank[to], from === null ? 0 : rank[from] + 1);
  }
  for (const { from, to } of ALLOWED_TRANSITIONS) assert.ok(from === null || rank[to] > rank[from], `${from} → ${to} must climb`);
  return rank;
}

/**
 * Throws unless `trail` leads from `from` to `to` one allowed step at a time: what every writer
 * of intent state checks before it writes (a bug, never an input error).
 */
export function assertTrail(
  from: IntentStatus | null,
  to: IntentStatus,
  trail: ReadonlyArray<{ readonly from: string | null; readonly to: string }>,
): void {
  let at: string | null = from;
  for (const step of trail) {
    assert.ok(step.from === at, `a trail from ${from ?? 'nothing'} breaks at ${step.from ?? 'nothing'} → ${step.to}`);
    assert.ok(
      isIntentStatus(step.to) && isAllowedTransition(at as IntentStatus | null, step.to),
      `${at ?? 'nothing'} → ${step.to} is not in the transition table`,
    );
    at = step.to;
  }
  assert.equal(at, to, `a trail from ${from ?? 'nothing'} ends in ${at ?? 'nothing'}, not ${to}`);
}

export function isIntentStatus(value: string): value is IntentStatus {
  return (INTENT_STATUSES as readonly string[]).includes(value);
}

/**
 * The PSPX worker's sub-states (docs/PSPX.md, as src/workers/psp-worker.ts drives them).
 * They share the audit log with the intent statuses but form a chain of their own, which starts
 * implicitly at NEW (psp_state at creation, without an event), moves only while the intent is
 * AUTHORIZED, and ends in CONFIRMED, FAILED or MANUAL_REVIEW. FAILED and MANUAL_REVIEW are spelt
 * like intent statuses; what tells a sub-state event apart is its statusFrom, a sub-state.
 * CONFIRMED and FAILED leave the intent AUTHORIZED (an outbox job settles or fails it later, with
 * an event of its own); the move into MANUAL_REVIEW moves the intent in the same event.
 */
export const PSP_SUB_STATES = [
  'NEW',
  'QUERY_PENDING',
  'QUERIED',
  'CONFIRM_PENDING',
  'INQUIRING',
  'CONFIRMED',
  'FAILED',
  'MANUAL_REVIEW',
] as const;
export type PspSubState = (typeof PSP_SUB_STATES)[number];

/** Where a PSPX intent's sub-state chain starts before its first recorded move. */
export const PSP_INITIAL_SUB_STATE: PspSubState = 'NEW';

export interface PspTransition {
  readonly from: PspSubState;
  readonly to: PspSubState;
  /** The intent status this same event moves the intent to, if it moves it at all. */
  readonly intentTo: IntentStatus | null;
}

export const PSP_TRANSITIONS: readonly PspTransition[] = [
  { from: 'NEW', to: 'QUERY_PENDING', intentTo: null },
  { from: 'QUERY_PENDING', to: 'QUERIED', intentTo: null },
  { from: 'QUERIED', to: 'CONFIRM_PENDING', intentTo: null },
  { from: 'CONFIRM_PENDING', to: 'CONFIRMED', intentTo: null },
  // A confirm that timed out, answered pending or unknown, or a worker restarted in between.
  { from: 'CONFIRM_PENDING', to: 'INQUIRING', intentTo: null },
  { from: 'INQUIRING', to: 'CONFIRMED', intentTo: null },
  // Rejected inquiry or confirm, a final failed answer, or the reservation's time ran out.
  { from: 'QUERY_PENDING', to: 'FAILED', intentTo: null },
  { from: 'QUERIED', to: 'FAILED', intentTo: null },
  { from: 'CONFIRM_PENDING', to: 'FAILED', intentTo: null },
  { from: 'INQUIRING', to: 'FAILED', intentTo: null },
  { from: 'INQUIRING', to: 'MANUAL_REVIEW', intentTo: 'MANUAL_REVIEW' },
];

const pspKeys = new Set(PSP_TRANSITIONS.map((t) => `${t.from}>${t.to}`));

/** The sub-states the PSP worker still has work in (a move out of them); the others are ends, for the outbox or an operator. */
export const PSP_ACTIVE_SUB_STATES: readonly PspSubState[] = PSP_SUB_STATES.filter((state) =>
  PSP_TRANSITIONS.some((t) => t.from === state),
);

export function isAllowedPspTransition(from: PspSubState, to: PspSubState): boolean {
  return pspKeys.has(`${from}>${to}`);
}

export function isPspSubState(value: string): value is PspSubState {
  return (PSP_SUB_STATES as readonly string[]).includes(value);
}
