// Loaded into the payorch process the bench starts (`node --import`): counts the bytes the process
// allocates on V8's heap and the collector's pauses, and writes the totals so far to
// BENCH_HEAP_PROBE_FILE on SIGUSR2, so that the bench can take two readings around a window.
// What is allocated between two collections is the heap used before the second minus the heap
// left after the first; every scavenge is a pause for every request in flight.
import { writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';
import { GCProfiler, getHeapStatistics } from 'node:v8';

/** Pauses of the collector at least this long are kept with their time (the latency phase's slowest requests). */
const GC_PAUSE_KEPT_MS = 10;

const file = process.env.BENCH_HEAP_PROBE_FILE;
if (file !== undefined) {
  let profiler = new GCProfiler();
  profiler.start();
  let usedAfterLast = getHeapStatistics().used_heap_size;
  const totals = {
    reading: 0,
    allocatedBytes: 0,
    scavenges: 0,
    scavengeMs: 0,
    markCompacts: 0,
    markCompactMs: 0,
    // What a full collection left alive: what a leak grows, without the collector's swing.
    /** @type {number | null} */
    liveBytesAfterMarkCompact: null,
    /** Since the reading before: the event loop's delay, and the collector's long pauses with their times. */
    eventLoopDelayMs: { p99: 0, max: 0 },
    /** @type {{ at: string, kind: number, ms: number }[]} */
    gcPauses: [],
  };
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  /** @type {{ at: string, kind: number, ms: number }[]} */
  let gcPauses = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const at = performance.timeOrigin + entry.startTime;
      // detail.kind: 1 scavenge, 2 minor mark-sweep, 4 mark-compact, 8 incremental, 16 weak callbacks.
      const kind = /** @type {{ detail?: { kind: number } }} */ (/** @type {unknown} */ (entry)).detail?.kind ?? 0;
      if (entry.duration >= GC_PAUSE_KEPT_MS)
        gcPauses.push({ at: new Date(at).toISOString(), kind, ms: Math.round(entry.duration * 10) / 10 });
    }
  }).observe({ entryTypes: ['gc'] });
  process.on('SIGUSR2', () => {
    const { statistics } = profiler.stop();
    profiler = new GCProfiler();
    profiler.start();
    for (const gc of statistics) {
      totals.allocatedBytes += gc.beforeGC.heapStatistics.usedHeapSize - usedAfterLast;
      usedAfterLast = gc.afterGC.heapStatistics.usedHeapSize;
      // cost is in microseconds; incremental marking steps and weak callbacks are neither kind.
      if (gc.gcType === 'Scavenge') {
        totals.scavenges += 1;
        totals.scavengeMs += gc.cost / 1000;
      } else if (gc.gcType === 'MarkSweepCompact') {
        totals.markCompacts += 1;
        totals.markCompactMs += gc.cost / 1000;
        totals.liveBytesAfterMarkCompact = gc.afterGC.heapStatistics.usedHeapSize;
      }
    }
    const usedNow = getHeapStatistics().used_heap_size;
    totals.allocatedBytes += usedNow - usedAfterLast;
    usedAfterLast = usedNow;
    totals.reading += 1;
    totals.eventLoopDelayMs = { p99: Math.round(delay.percentile(99) / 1e4) / 100, max: Math.round(delay.max / 1e4) / 100 };
    delay.reset();
    totals.gcPauses = gcPauses;
    gcPauses = [];
    writeFileSync(file, JSON.stringify(totals));
  });
}
