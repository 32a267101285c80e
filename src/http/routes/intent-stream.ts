import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../typed-app.js';
import Type from 'typebox';
import type { Broker } from '../../adapters/broker.js';
import type { Database } from '../../adapters/database.js';
import { apiError } from '../../domain/errors.js';
import { findOwnIntent, type Intent } from '../../domain/intents/store/intent-store.js';
import { type CursorSeal, refusedCursorMessage } from '../../domain/events/cursor-seal.js';
import { comparePositions, FEED_START, type FeedPosition } from '../../domain/events/feed-cursor.js';
import { type FeedEvent, readIntentFeed } from '../../domain/events/feed.js';
import { intentChannel } from '../../domain/intents/store/status-publisher.js';
import { FINAL_STATUSES, type IntentStatus } from '../../domain/model.js';
import { isIntentStatus, STATUS_RANK } from '../../domain/intents/store/state-machine.js';
import { responses, Uuid } from '../schemas/shared.js';
import { refuseRateLimited } from '../plugins/throttle.js';

/** A comment line this often keeps proxies and load balancers from closing an idle stream. */
export const STREAM_HEARTBEAT_INTERVAL_MS = 15_000;
/**
 * A stream ends after this long even if the intent is still moving (a PSPX payout in
 * MANUAL_REVIEW can wait for days). The client reconnects, possibly to another instance, and the
 * first event of the new stream tells it the current status, so nothing is lost.
 */
export const STREAM_LIFETIME_MAX_MS = 30 * 60_000;

export interface IntentStreamDeps {
  readonly db: Database;
  readonly broker: Broker;
  /** Seals the feed positions sent as event ids, and opens Last-Event-ID (docs/rules.md R63). */
  readonly cursors: CursorSeal;
  readonly heartbeatIntervalMs?: number;
  readonly lifetimeMaxMs?: number;
  /** Open-stream gauge; absent in tests that build the route alone. */
  readonly openStreams?: { inc(): void; dec(): void };
  /** Open streams one service may hold on this instance; past it, 429. Absent: no cap. */
  readonly streamsPerServiceMax?: number;
  /** Called for each stream refused by the cap (a metric). */
  readonly onRefused?: () => void;
}

/** Open streams per service on this instance: a slot is taken before any work and given back exactly once. */
class StreamSlots {
  private readonly open = new Map<string, number>();

  constructor(private readonly perServiceMax: number) {}

  /** The slot's release, or null when the service holds its maximum already. */
  take(serviceId: string): (() => void) | null {
    const held = this.open.get(serviceId) ?? 0;
    if (held >= this.perServiceMax) return null;
    this.open.set(serviceId, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(serviceId) ?? 1) - 1;
      if (left === 0) this.open.delete(serviceId);
      else this.open.set(serviceId, left);
    };
  }
}

interface StatusMessage {
  readonly intentId: string;
  readonly status: IntentStatus;
  readonly updatedAt: string;
}

const isFinal = (status: IntentStatus) => FINAL_STATUSES.includes(status);

function parseMessage(raw: string, intentId: string): StatusMessage | null {
  try {
    const value = JSON.parse(raw) as Partial<Record<keyof StatusMessage, unknown>>;
    if (value.intentId !== intentId || typeof value.status !== 'string' || !isIntentStatus(value.status)) return null;
    if (typeof value.updatedAt !== 'string') return null;
    return { intentId, status: value.status, updatedAt: value.updatedAt };
  } catch {
    return null;
  }
}

const IdParams = Type.Object({ id: Uuid });
const StreamHeaders = Type.Object({
  'last-event-id': Type.Optional(Type.String({ maxLength: 200, description: 'the `id` of the last event received: resume after it' })),
});
/** A stream slot frees when a client leaves; a second is a fair wait before trying again. */
const STREAM_SLOT_RETRY_MS = 1_000;

const STREAM_DESCRIPTION =
  'Server-Sent Events. The first event is the current status; then one `event: status` per transition, ' +
  'each with `data: {"intentId","status","updatedAt"}`. Each event carries its event-feed cursor as `id` (rarely none, when the feed lags); ' +
  'a client that reconnects with `Last-Event-ID` first gets the changes after that cursor, then the live ones. ' +
  'The stream ends after a final status (SETTLED, FAILED, ' +
  `CANCELED, EXPIRED), after ${STREAM_LIFETIME_MAX_MS / 60_000} minutes (reconnect: the first event tells the status), ` +
  `or at shutdown. A comment line is sent every ${STREAM_HEARTBEAT_INTERVAL_MS / 1000} s.`;

/** GET /intents/{id}/stream: the live status messages of one intent of the calling service. */
export function intentStreamRoutes(app: App, deps: IntentStreamDeps): void {
  const heartbeatIntervalMs = deps.heartbeatIntervalMs ?? STREAM_HEARTBEAT_INTERVAL_MS;
  const lifetimeMaxMs = deps.lifetimeMaxMs ?? STREAM_LIFETIME_MAX_MS;
  /** Open streams end at shutdown; otherwise the server would wait for them before closing. */
  const open = new Set<() => void>();
  const slots = new StreamSlots(deps.streamsPerServiceMax ?? Number.POSITIVE_INFINITY);
  app.addHook('preClose', async () => {
    for (const end of [...open]) end();
  });

  app.get(
    '/intents/:id/stream',
    {
      schema: {
        tags: ['intents'],
        operationId: 'streamIntentStatus',
        summary: 'Live status of an intent of the calling service (Server-Sent Events)',
        description: STREAM_DESCRIPTION,
        params: IdParams,
        headers: StreamHeaders,
        response: responses({ 200: { description: 'text/event-stream', content: { 'text/event-stream': { schema: Type.String() } } } }, [
          'NOT_FOUND',
          'RATE_LIMITED',
          'SERVICE_UNAVAILABLE',
        ]),
      },
    },
    async (request, reply) => {
      const lastEventId = request.headers['last-event-id'];
      const resumeAfter = lastEventId === undefined ? null : deps.cursors.open(request.caller.serviceId, lastEventId);
      if (lastEventId !== undefined && resumeAfter === null)
        throw apiError('VALIDATION_ERROR', refusedCursorMessage('Last-Event-ID', lastEventId));
      const release = slots.take(request.caller.serviceId);
      if (release === null) {
        deps.onRefused?.();
        throw refuseRateLimited(reply, STREAM_SLOT_RETRY_MS, `service ${request.caller.serviceId} holds its maximum of open streams`);
      }
      try {
        return await streamIntent(request.params.id, resumeAfter, request, reply, release);
      } catch (error) {
        release();
        throw error;
      }
    },
  );

  /**
   * The intent's feed events after the client's Last-Event-ID (resuming), or its newest one (a new
   * stream: its cursor becomes the first event's id when it is the current status).
   */
  async function feedEvents(serviceId: string, intentId: string, resumeAfter: FeedPosition | null): Promise<FeedEvent[]> {
    const events = await readIntentFeed(deps.db, { serviceId, intentId, after: resumeAfter });
    return resumeAfter === null ? events.slice(-1) : events;
  }

  async function streamIntent(
    id: string,
    resumeAfter: FeedPosition | null,
    request: FastifyRequest,
    reply: FastifyReply,
    release: () => void,
  ): Promise<FastifyReply> {
    // Subscribe first, then read: a transition between the two is queued, not lost.
    const queued: StatusMessage[] = [];
    let deliver: ((message: StatusMessage) => void) | null = null;
    let unsubscribe: () => Promise<void>;
    try {
      unsubscribe = await deps.broker.subscribe(intentChannel(id), (raw) => {
        const message = parseMessage(raw, id);
        if (message === null) return;
        if (deliver === null) queued.push(message);
        else deliver(message);
      });
    } catch (error) {
      request.log.error({ err: error, traceId: id }, 'live status subscription failed');
      throw apiError('SERVICE_UNAVAILABLE', 'live status broker unavailable');
    }
    let current: Intent;
    let fromFeed: FeedEvent[];
    try {
      current = await findOwnIntent(deps.db, request.caller.serviceId, id);
      fromFeed = await feedEvents(request.caller.serviceId, id, resumeAfter);
    } catch (error) {
      await unsubscribe();
      throw error;
    }

    reply.hijack();
    // A client that left during the read has already fired its 'close': nothing would end the stream.
    if (request.raw.socket.destroyed) {
      release();
      await unsubscribe();
      return reply;
    }
    const stream = openStream(reply.raw, { heartbeatIntervalMs, lifetimeMaxMs }, () => {
      release();
      open.delete(stream.end);
      deps.openStreams?.dec();
      unsubscribe().catch((error: unknown) => request.log.warn({ err: error, traceId: id }, 'live status unsubscribe failed'));
    });
    open.add(stream.end);
    deps.openStreams?.inc();

    const statusStream = new StatusStream(
      stream,
      (after) =>
        feedEvents(request.caller.serviceId, id, after ?? FEED_START).catch((error: unknown) => {
          request.log.warn({ err: error, traceId: id }, 'feed read for a live stream failed; the live message goes without an id');
          return [];
        }),
      (event) => deps.cursors.seal(event.serviceId, event.position),
    );
    if (resumeAfter !== null) statusStream.sendFeed(fromFeed);
    const newest = fromFeed.at(-1);
    statusStream.send(
      { intentId: id, status: current.status, updatedAt: current.updatedAt.toISOString() },
      resumeAfter === null ? newest : undefined,
    );
    statusStream.skipTo(newest?.position ?? resumeAfter);
    deliver = (message) => statusStream.cue(message);
    for (const message of queued.splice(0)) deliver(message);
    return reply;
  }
}

/**
 * What one stream sends, in status order (a status at or below the last one sent is dropped):
 * feed events with their cursors as ids, so a client that reconnects with Last-Event-ID resumes
 * without repeats. A live message is first a cue to read the intent's feed after the last cursor
 * sent; it goes out itself, without an id, only when the feed does not have its change yet.
 */
class StatusStream {
  private lastRank = -1;
  private last: FeedPosition | null = null;
  private cues: Promise<void> = Promise.resolve();

  constructor(
    private readonly stream: OpenStream,
    private readonly readFeedAfter: (after: FeedPosition | null) => Promise<FeedEvent[]>,
    private readonly eventIdOf: (event: FeedEvent) => string,
  ) {}

  /** `event`: the feed event of this status, whose cursor becomes the SSE id when it is this status. */
  send(message: StatusMessage, event?: FeedEvent): void {
    if (STATUS_RANK[message.status] <= this.lastRank) return;
    this.lastRank = STATUS_RANK[message.status];
    this.stream.send(message, event?.statusTo === message.status ? this.eventIdOf(event) : undefined);
    if (isFinal(message.status)) this.stream.end();
  }

  sendFeed(events: readonly FeedEvent[]): void {
    for (const event of events) {
      this.send({ intentId: event.intentId, status: event.statusTo, updatedAt: event.occurredAt.toISOString() }, event);
      this.skipTo(event.position);
    }
  }

  skipTo(position: FeedPosition | null): void {
    if (position !== null && (this.last === null || comparePositions(position, this.last) > 0)) this.last = position;
  }

  /** One at a time, in arrival order: each reads the feed after what the previous one sent. */
  cue(message: StatusMessage): void {
    this.cues = this.cues.then(async () => {
      if (this.stream.ended) return;
      this.sendFeed(await this.readFeedAfter(this.last));
      this.send(message);
    });
  }
}

interface OpenStream {
  /** `eventId`: the feed cursor of the change, which the client sends back as Last-Event-ID. */
  send(message: StatusMessage, eventId?: string): void;
  /** Ends the response once; safe to call again or after the client left. */
  end(): void;
  readonly ended: boolean;
}

function openStream(raw: ServerResponse, limits: { heartbeatIntervalMs: number; lifetimeMaxMs: number }, onEnd: () => void): OpenStream {
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    // nginx buffers responses by default, which would hold events back.
    'x-accel-buffering': 'no',
  });
  // Comment line: makes the headers and the stream visible to the client at once.
  raw.write(': stream open\n\n');
  let ended = false;
  const heartbeat = setInterval(() => raw.write(': heartbeat\n\n'), limits.heartbeatIntervalMs);
  const lifetime = setTimeout(() => end(), limits.lifetimeMaxMs);
  const end = () => {
    if (ended) return;
    ended = true;
    clearInterval(heartbeat);
    clearTimeout(lifetime);
    if (!raw.writableEnded) raw.end();
    onEnd();
  };
  // The client went away (or the socket broke): stop the timers and the subscription.
  raw.on('close', end);
  return {
    get ended() {
      return ended;
    },
    send(message, eventId) {
      if (ended) return;
      raw.write(`${eventId === undefined ? '' : `id: ${eventId}\n`}event: status\ndata: ${JSON.stringify(message)}\n\n`);
    },
    end,
  };
}
