import type { Logger } from '../../../adapters/logger.js';
import type { Broker } from '../../../adapters/broker.js';

export const intentChannel = (intentId: string) => `intent.${intentId}`;

/**
 * Live status messages `{intentId, status, updatedAt}` on `intent.{id}`. Sent after the
 * transition is committed; a broker failure is logged and never undoes or blocks the transition.
 */
export class StatusPublisher {
  constructor(
    private readonly broker: Broker,
    private readonly log: Logger,
  ) {}

  async publish(intentId: string, statuses: readonly string[], updatedAt: Date): Promise<void> {
    for (const status of statuses) {
      try {
        await this.broker.publish(intentChannel(intentId), JSON.stringify({ intentId, status, updatedAt: updatedAt.toISOString() }));
      } catch (error) {
        this.log.warn({ traceId: intentId, err: error, status }, 'live status message not published');
      }
    }
  }
}
