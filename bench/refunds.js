// The refunds section of npm run bench (docs/rules.md R57): refunds at saturation next to P2P in
// the same run, at the same concurrency, and the p99 of a refund at 250/s offered next to a P2P
// payment's. Each refund returns part of a P2P payment its generator made (bench/load.js, kind
// 'refund'). Figures compare within one run only.

/** The targets: refunds at saturation against P2P, and a refund's p99 at this rate. */
export const REFUND_LATENCY_RATE_PER_S = 250;

/**
 * @param {{
 *   runJson: (script: 'load.js', options: import('./load.js').LoadOptions) => Promise<import('./load.js').LoadResult>,
 *   base: Omit<import('./load.js').LoadOptions, 'url' | 'kind' | 'mode'>,
 *   url: string,
 *   concurrency: number,
 *   log: (...parts: unknown[]) => void,
 * }} bench
 */
export async function refundsPhase({ runJson, base, url, concurrency, log }) {
  const closed = (/** @type {'p2p' | 'refund'} */ kind) => runJson('load.js', { ...base, url, kind, mode: 'closed', concurrency });
  // At the offered rate, refunds spread over one original per refund a second offered, so each
  // payment is refunded about once a second: a platform's refunds fall on many payments. The
  // saturation loop's 32 originals took about eight refunds a second each, which measured the
  // queue of refunds of one payment rather than a refund's latency.
  const open = (/** @type {'p2p' | 'refund'} */ kind) =>
    runJson('load.js', { ...base, url, kind, mode: 'open', rate: REFUND_LATENCY_RATE_PER_S, concurrency: REFUND_LATENCY_RATE_PER_S });
  const p2pSaturation = await closed('p2p');
  const refundSaturation = await closed('refund');
  const p2pAtRate = await open('p2p');
  const refundAtRate = await open('refund');
  const saturationRatio = refundSaturation.throughputPerS / p2pSaturation.throughputPerS;
  log(
    'refunds:',
    refundSaturation.throughputPerS,
    '/s at',
    concurrency,
    'in flight against P2P',
    p2pSaturation.throughputPerS,
    `/s (${(saturationRatio * 100).toFixed(0)} %); p99 at ${REFUND_LATENCY_RATE_PER_S}/s:`,
    refundAtRate.latencyMs.p99,
    'ms (P2P',
    p2pAtRate.latencyMs.p99,
    'ms); errors',
    JSON.stringify(refundSaturation.errors),
    JSON.stringify(refundAtRate.errors),
  );
  return { concurrency, p2pSaturation, refundSaturation, saturationRatio, p2pAtRate, refundAtRate };
}
