import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';

export type MessageHandler = (message: string) => void;

/** Live status messages: fire-and-forget publication on named channels (`intent.{id}`). */
export interface Broker {
  readonly kind: 'memory' | 'redis';
  publish(channel: string, message: string): Promise<void>;
  /** Resolves once the subscription is active; the returned function ends it. */
  subscribe(channel: string, handler: MessageHandler): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export function createMemoryBroker(): Broker {
  const emitter = new EventEmitter();
  // One listener per open stream; the default warning at 10 would fire under normal load.
  emitter.setMaxListeners(0);
  return {
    kind: 'memory',
    async publish(channel, message) {
      emitter.emit(channel, message);
    },
    async subscribe(channel, handler) {
      emitter.on(channel, handler);
      return async () => {
        emitter.off(channel, handler);
      };
    },
    async close() {
      emitter.removeAllListeners();
    },
  };
}

/** Redis needs a connection of its own for subscriptions; publication goes through the other. */
export function createRedisBroker(url: string): Broker {
  const options = { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true };
  const publisher = new Redis(url, options);
  const subscriber = new Redis(url, options);
  const handlers = new Map<string, Set<MessageHandler>>();
  // Connection errors are retried by ioredis; without listeners they would crash the process.
  publisher.on('error', () => {});
  subscriber.on('error', () => {});
  subscriber.on('message', (channel: string, message: string) => {
    for (const handler of handlers.get(channel) ?? []) handler(message);
  });
  return {
    kind: 'redis',
    async publish(channel, message) {
      await publisher.publish(channel, message);
    },
    async subscribe(channel, handler) {
      let set = handlers.get(channel);
      if (set === undefined) {
        set = new Set();
        handlers.set(channel, set);
        await subscriber.subscribe(channel);
      }
      set.add(handler);
      return async () => {
        const current = handlers.get(channel);
        current?.delete(handler);
        if (current !== undefined && current.size === 0) {
          handlers.delete(channel);
          await subscriber.unsubscribe(channel).catch(() => {});
        }
      };
    },
    async close() {
      handlers.clear();
      publisher.disconnect();
      subscriber.disconnect();
    },
  };
}

export const createBroker = (redisUrl: string | undefined): Broker =>
  redisUrl === undefined ? createMemoryBroker() : createRedisBroker(redisUrl);
