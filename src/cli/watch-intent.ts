import type { IntentStatus, IntentStatusMessage } from '@payorch/client';
import { assertNever } from '../domain/errors.js';
import { STATUS_RANK } from '../domain/intents/store/state-machine.js';
import type { ApiContext } from './api-context.js';
import { EXIT, type ExitCode, sleepOf } from './cli-io.js';

export interface WatchOptions {
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** false: poll only (--poll), for a path that breaks long-lived responses. */
  readonly stream: boolean;
}

/** What the watch prints per new status; `failureReason` only where a poll read it. */
interface StatusLine {
  readonly intentId: string;
  readonly status: IntentStatus;
  readonly updatedAt: string;
  readonly failureReason?: string;
}

/** Where a watch stops: a final status, or MANUAL_REVIEW, which waits for a person rather than a worker. */
export function endsWatch(status: IntentStatus): boolean {
  switch (status) {
    case 'SETTLED':
    case 'FAILED':
    case 'CANCELED':
    case 'EXPIRED':
    case 'MANUAL_REVIEW':
      return true;
    case 'CREATED':
    case 'VALIDATED':
    case 'AUTHORIZED':
    case 'SETTLING':
      return false;
    default:
      return assertNever(status);
  }
}

/** Prints each status once, in order, whether a poll or the stream saw it first. */
function statusPrinter(context: ApiContext): (line: StatusLine) => void {
  let lastRank = -1;
  return (line) => {
    const rank = STATUS_RANK[line.status];
    if (rank <= lastRank) return;
    lastRank = rank;
    if (context.out.json) context.out.jsonLine(line);
    else context.out.line(`${line.updatedAt}  ${line.status}${line.failureReason === undefined ? '' : `  ${line.failureReason}`}`);
  };
}

type Wake =
  | { readonly kind: 'tick' }
  | { readonly kind: 'message'; readonly message: IntentStatusMessage }
  | { readonly kind: 'stream-ended' };

/**
 * The live stream, as a source of wake-ups: `next()` resolves with its next message, or with
 * 'stream-ended' once it ends or fails (an older service, a proxy, the stream's lifetime). Then
 * it stays quiet and the polls carry on alone.
 */
function liveMessages(context: ApiContext, intentId: string, signal: AbortSignal): { next(): Promise<Wake> } {
  const messages = context.client.intents.stream(intentId, { signal });
  let ended = false;
  let pending: Promise<Wake> | null = null;
  const quiet = new Promise<Wake>(() => {});
  return {
    next() {
      if (ended) return quiet;
      pending ??= messages.next().then(
        (result): Wake => (result.done === true ? { kind: 'stream-ended' } : { kind: 'message', message: result.value }),
        (): Wake => ({ kind: 'stream-ended' }),
      );
      return pending.then((wake) => {
        pending = null;
        if (wake.kind === 'stream-ended') ended = true;
        return wake;
      });
    },
  };
}

/** Transitions an intent can go through, sub-states aside: a bound on stream messages per watch. */
const STREAM_MESSAGES_MAX = 32;

/**
 * Prints each new status of an intent until a final status or MANUAL_REVIEW. GET /intents/{id}
 * every `intervalMs` is the source of truth; the live stream (when `stream` is on and the service
 * offers it) prints transitions as they happen, between the polls, for intents created with
 * live=true. Not finished within `timeoutMs` exits 3: the service did not finish in time.
 */
export async function watchIntent(context: ApiContext, intentId: string, options: WatchOptions): Promise<ExitCode> {
  const print = statusPrinter(context);
  const sleep = sleepOf(context.io);
  const deadlineMs = Date.now() + options.timeoutMs;
  // Bounded by count as well as time: a clock that jumps cannot make the loop endless.
  const pollsMax = Math.max(1, Math.ceil(options.timeoutMs / options.intervalMs));
  const stop = new AbortController();
  const live = options.stream ? liveMessages(context, intentId, stop.signal) : null;
  let status: IntentStatus | undefined;
  let messages = 0;
  try {
    for (let poll = 1; poll <= pollsMax; poll++) {
      const intent = await context.client.intents.get(intentId);
      status = intent.status;
      print({
        intentId: intent.intentId,
        status: intent.status,
        updatedAt: intent.updatedAt,
        ...(intent.failureReason === null ? {} : { failureReason: intent.failureReason }),
      });
      if (endsWatch(intent.status)) return EXIT.OK;
      if (poll === pollsMax || Date.now() >= deadlineMs) break;
      // Until the next poll is due, print what the stream says, if anything.
      const tick = sleep(options.intervalMs).then((): Wake => ({ kind: 'tick' }));
      const nextWake = () => Promise.race([tick, live === null || messages >= STREAM_MESSAGES_MAX ? tick : live.next()]);
      for (let wake = await nextWake(); wake.kind !== 'tick'; wake = await nextWake()) {
        if (wake.kind === 'stream-ended') continue;
        messages += 1;
        print(wake.message);
        status = wake.message.status;
        if (endsWatch(wake.message.status)) return EXIT.OK;
      }
    }
  } finally {
    stop.abort();
  }
  context.io.err(`payorch: intent ${intentId} still ${status ?? 'unknown'} after ${options.timeoutMs} ms\n`);
  return EXIT.SERVER;
}
