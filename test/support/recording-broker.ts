import type { Broker } from '../../src/adapters/broker.js';

export interface RecordingBroker {
  readonly broker: Broker;
  readonly published: ReadonlyArray<{ channel: string; message: Record<string, unknown> }>;
  /** The statuses published on one intent's channel, in order. */
  statusesOf(intentId: string): unknown[];
  /** While on, every publication fails as a broker that is down would. */
  setFailing(value: boolean): void;
}

/** The real broker of this run (in-process, or Redis with REDIS_URL), with every publication recorded. */
export function recording(inner: Broker): RecordingBroker {
  const published: Array<{ channel: string; message: Record<string, unknown> }> = [];
  let failing = false;
  const broker: Broker = {
    kind: inner.kind,
    async publish(channel, message) {
      if (failing) throw new Error('broker down');
      published.push({ channel, message: JSON.parse(message) as Record<string, unknown> });
      await inner.publish(channel, message);
    },
    subscribe: (channel, handler) => inner.subscribe(channel, handler),
    close: () => inner.close(),
  };
  return {
    broker,
    published,
    statusesOf: (intentId) => published.filter((p) => p.channel === `intent.${intentId}`).map((p) => p.message.status),
    setFailing: (value) => {
      failing = value;
    },
  };
}

/** Waits up to 2 s for `condition`: messages are published after the answer, not before it. */
export async function until(condition: () => boolean): Promise<void> {
  for (let waitedMs = 0; !condition() && waitedMs < 2_000; waitedMs += 10) await new Promise((r) => setTimeout(r, 10));
}
