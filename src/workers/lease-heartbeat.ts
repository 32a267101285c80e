import type { Logger } from '../adapters/logger.js';

/**
 * Keeps a worker's short leases alive while it works on what they cover, whatever its calls out
 * wait for: every third of a lease, one statement renews all it holds (each with the claim it was
 * taken with, so a lease another worker took over meanwhile is left alone). A killed process stops
 * beating, and its leases lapse within one lease. A failed renewal is logged once until one
 * succeeds again: the guarded writes, not the heartbeat, keep the work single, so a lease that
 * lapses meanwhile costs only a takeover.
 */
export class LeaseHeartbeat<Claim> {
  /** The claim each held key was taken with. */
  private readonly held = new Map<string, Claim>();
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private failing = false;

  constructor(
    private readonly options: {
      readonly leaseMs: number;
      /** Renews the leases of these keys, each still held with its claim. */
      readonly renew: (held: ReadonlyMap<string, Claim>) => Promise<unknown>;
      readonly log: Logger;
      /** The log events' prefix: `<name>_heartbeat_failed`, `<name>_heartbeat_restored`. */
      readonly name: string;
    },
  ) {}

  hold(key: string, claim: Claim): void {
    this.held.set(key, claim);
    if (this.timer !== null) return;
    this.timer = setInterval(() => void this.beat(), Math.max(1, Math.floor(this.options.leaseMs / 3)));
    // Only the work in flight keeps the process alive, not its heartbeat.
    this.timer.unref();
  }

  /**
   * Stops renewing `key` (when still held with `claim`). Resolves once a renewal already on its way
   * has ended, so that a write made after it (the next attempt's time) is never overwritten by it.
   */
  async drop(key: string, claim: Claim): Promise<void> {
    if (this.held.get(key) === claim) this.held.delete(key);
    if (this.held.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
    await this.beating;
  }

  private beat(): Promise<void> {
    if (this.beating !== null || this.held.size === 0) return this.beating ?? Promise.resolve();
    const { log, name } = this.options;
    this.beating = this.options
      .renew(new Map(this.held))
      .then(
        () => {
          if (this.failing) log.info({ event: `${name}_heartbeat_restored` }, `${name} worker renews its leases again`);
          this.failing = false;
        },
        (error: unknown) => {
          if (!this.failing)
            log.warn(
              { event: `${name}_heartbeat_failed`, err: error },
              `${name} worker could not renew its leases; they lapse unless it recovers`,
            );
          this.failing = true;
        },
      )
      .finally(() => {
        this.beating = null;
      });
    return this.beating;
  }
}
