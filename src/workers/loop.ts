import type { Logger } from '../adapters/logger.js';

export interface Loop {
  /** Ends the timer and waits for the run in progress. */
  stop(): Promise<void>;
}

/**
 * Runs `run` every `intervalMs`, measured from the end of one run to the start of the next, so
 * runs never overlap and a slow run delays the next instead of piling up. A failed run is logged
 * and the loop goes on.
 */
export function startLoop(name: string, intervalMs: number, run: () => Promise<unknown>, log: Logger): Loop {
  let timer: NodeJS.Timeout | null = null;
  let current: Promise<void> | null = null;
  let stopped = false;

  const tick = () => {
    current = run().then(
      () => undefined,
      (error: unknown) =>
        log.error({ event: 'worker_run_failed', worker: name, err: error }, `${name} run failed; tried again at the next tick`),
    );
    void current.finally(() => {
      current = null;
      if (!stopped) timer = setTimeout(tick, intervalMs);
    });
  };
  timer = setTimeout(tick, intervalMs);

  return {
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      await current;
    },
  };
}
