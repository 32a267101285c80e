import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';

/**
 * NATS JetStream as the event bus (docs/EVENTS.md): the official client, `@nats-io/jetstream` on
 * `@nats-io/transport-node` (the maintained v3 line; the older `nats` package is its
 * predecessor). Each message carries `Nats-Msg-Id`, so the stream drops a repeat within its
 * duplicate window.
 */
export interface BusMessage {
  readonly subject: string;
  /** Nats-Msg-Id: the feed cursor. */
  readonly id: string;
  readonly data: string;
}

export interface EventBus {
  /**
   * Publishes in order and waits for the stream's acknowledgements; answers how many messages,
   * from the first, the stream acknowledged (stored, or dropped as a duplicate of a stored one).
   */
  publish(messages: readonly BusMessage[]): Promise<number>;
  /** Nats-Msg-Id of the stream's newest message; null when the stream is empty. */
  lastMessageId(): Promise<string | null>;
  close(): Promise<void>;
}

export interface EventBusSettings {
  readonly streamName: string;
  /** Subjects are `{subjectPrefix}.{serviceId}`; the stream takes `{subjectPrefix}.>`. */
  readonly subjectPrefix: string;
}

/** docs/rules.md R56. */
export const EVENT_BUS_DEFAULTS = { streamName: 'PAYORCH_EVENTS', subjectPrefix: 'payorch.events' } as const satisfies EventBusSettings;

/** How long one publication waits for the stream's acknowledgement. */
const PUBLISH_ACK_TIMEOUT_MS = 5_000;
/** Connecting gives up after this; the publisher tries again at its next tick. */
const CONNECT_TIMEOUT_MS = 5_000;

/** Connects and creates the stream when it is absent (an existing stream is used as it is). */
export async function connectEventBus(url: string, settings: EventBusSettings): Promise<EventBus> {
  const nc = await connect({ servers: url.split(',').map((s) => s.trim()), timeout: CONNECT_TIMEOUT_MS, name: 'payorch' });
  try {
    const jsm = await jetstreamManager(nc);
    await ensureStream(jsm, settings);
    return openBus(nc, jsm, settings);
  } catch (error) {
    await nc.close();
    throw error;
  }
}

async function ensureStream(jsm: JetStreamManager, settings: EventBusSettings): Promise<void> {
  try {
    await jsm.streams.info(settings.streamName);
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)) throw error;
    await jsm.streams.add({ name: settings.streamName, subjects: [`${settings.subjectPrefix}.>`] });
  }
}

function openBus(nc: NatsConnection, jsm: JetStreamManager, settings: EventBusSettings): EventBus {
  const js = jetstream(nc);
  return {
    async publish(messages) {
      // Sent back to back on one connection, so the server stores them in this order; the
      // acknowledgements are awaited together.
      const acks = await Promise.allSettled(
        messages.map((m) => js.publish(m.subject, m.data, { msgID: m.id, timeout: PUBLISH_ACK_TIMEOUT_MS })),
      );
      const firstFailed = acks.findIndex((ack) => ack.status === 'rejected');
      if (firstFailed === -1) return messages.length;
      const failure = acks[firstFailed] as PromiseRejectedResult;
      if (firstFailed === 0) throw failure.reason;
      return firstFailed;
    },
    async lastMessageId() {
      const info = await jsm.streams.info(settings.streamName);
      if (info.state.messages === 0) return null;
      const last = await jsm.streams.getMessage(settings.streamName, { seq: info.state.last_seq });
      return last?.header.get('Nats-Msg-Id') || null;
    },
    async close() {
      await nc.drain().catch(() => nc.close());
    },
  };
}
