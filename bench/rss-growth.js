// RSS growth over a soak, from the samples: the median of the samples between 10 % and 30 % of the
// soak against the median of its last 20 %. Start-up and the first allocations of a warm process
// are not a leak, and single samples swing ±15 % with the garbage collector's cycle.
export function rssGrowth(samples, durationS) {
  const median = (list) => {
    const sorted = list.map((s) => s.rssMb).sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)];
  };
  const window = (from, to) => samples.filter((s) => s.atS >= durationS * from && s.atS <= durationS * to);
  const start = median(window(0.1, 0.3));
  const end = median(window(0.8, 1));
  return { rssStartMb: start, rssEndMb: end, rssGrowthPct: Math.round(((end - start) / start) * 1000) / 10 };
}
