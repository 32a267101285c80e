// Growth over a soak, from the samples: the median of the samples between 10 % and 30 % of the
// soak against the median of its last 20 %. Start-up and the first allocations of a warm process
// are not a leak, and single RSS samples swing ±15 % with the garbage collector's cycle.
/**
 * @param {ReadonlyArray<{ readonly atS: number, readonly rssMb: number, readonly liveHeapMb?: number | null }>} samples
 * @param {number} durationS
 */
export function rssGrowth(samples, durationS) {
  const rss = growth(samples, durationS, (s) => s.rssMb);
  const live = growth(samples, durationS, (s) => s.liveHeapMb ?? undefined);
  return {
    rssStartMb: rss.start,
    rssEndMb: rss.end,
    rssGrowthPct: rss.pct,
    liveHeapStartMb: live.start ?? null,
    liveHeapEndMb: live.end ?? null,
    liveHeapGrowthPct: live.pct,
  };
}

/**
 * @template S
 * @param {ReadonlyArray<S & { readonly atS: number }>} samples
 * @param {number} durationS
 * @param {(sample: S) => number | undefined} value
 */
function growth(samples, durationS, value) {
  /** @param {ReadonlyArray<S>} list */
  const median = (list) => {
    const sorted = list
      .map(value)
      .filter((v) => v !== undefined)
      .sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)];
  };
  /**
   * @param {number} from
   * @param {number} to
   */
  const window = (from, to) => samples.filter((s) => s.atS >= durationS * from && s.atS <= durationS * to);
  const start = median(window(0.1, 0.3));
  const end = median(window(0.8, 1));
  // A soak too short to have samples in a window has no growth to tell (null in the JSON, as NaN was).
  const pct = start === undefined || end === undefined ? null : Math.round(((end - start) / start) * 1000) / 10;
  return { start, end, pct };
}
