// docs/bench.svg from a results object: throughput against its floors, and latency at fixed
// offered rates. Hand-written SVG: two bar charts do not need a plotting library.
import { writeFileSync } from 'node:fs';

/** @typedef {import('./load.js').Latencies} Latencies */
/** @typedef {{ svg: string, height: number }} Chart */
/** @typedef {{ label: string, value: number | null | undefined, color: string }} Bar */
/** @typedef {{ name: string, points: Array<Latencies & { rate: number | null }> }} Series */

const W = 900;
/** @param {unknown} s */
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');

/**
 * @param {number} y0
 * @param {string} title
 * @param {readonly Bar[]} rows
 * @param {string} unit
 * @returns {Chart}
 */
function hbars(y0, title, rows, unit) {
  const labelW = 330;
  const barW = W - labelW - 120;
  const max = Math.max(...rows.map((r) => r.value ?? 0), 1);
  let y = y0 + 28;
  let out = `<text x="20" y="${y0 + 14}" class="h">${esc(title)}</text>`;
  for (const r of rows) {
    const w = Math.max(1, ((r.value ?? 0) / max) * barW);
    out += `<text x="${labelW - 8}" y="${y + 14}" text-anchor="end">${esc(r.label)}</text>`;
    out += `<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="18" fill="${r.color}"/>`;
    out += `<text x="${labelW + w + 6}" y="${y + 14}">${esc(r.value ?? 'n/a')} ${unit}</text>`;
    y += 24;
  }
  return { svg: out, height: y - y0 + 10 };
}

/**
 * Grouped bars on a log scale: latencies span three orders of magnitude once a rate saturates.
 * @param {number} y0
 * @param {string} title
 * @param {readonly Series[]} series
 * @returns {Chart}
 */
function latencyChart(y0, title, series) {
  const left = 80;
  const plotW = W - left - 40;
  const plotH = 200;
  const top = y0 + 40;
  const maxMs = Math.max(10, ...series.flatMap((s) => s.points.flatMap((p) => [p.p50, p.p99, p.p999].filter((v) => v !== null))));
  const decades = Math.ceil(Math.log10(maxMs));
  /** @param {number} ms */
  const yOf = (ms) => top + plotH - ((Math.log10(Math.max(ms, 0.1)) + 1) / (decades + 1)) * plotH;
  let out = `<text x="20" y="${y0 + 14}" class="h">${esc(title)}</text>`;
  for (let d = -1; d <= decades; d++) {
    const y = yOf(10 ** d);
    out += `<line x1="${left}" x2="${left + plotW}" y1="${y}" y2="${y}" stroke="#ddd"/><text x="${left - 6}" y="${y + 4}" text-anchor="end">${10 ** d} ms</text>`;
  }
  const groups = series.flatMap((s) => s.points.map((p) => ({ ...p, name: s.name })));
  const gw = plotW / Math.max(groups.length, 1);
  const colors = { p50: '#4c78a8', p99: '#f58518', p999: '#e45756' };
  groups.forEach((g, i) => {
    const x = left + i * gw + gw * 0.15;
    const bw = (gw * 0.7) / 3;
    /** @type {const} */ (['p50', 'p99', 'p999']).forEach((k, j) => {
      const ms = g[k];
      if (ms === null) return;
      const y = yOf(ms);
      out += `<rect x="${(x + j * bw).toFixed(1)}" y="${y.toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${(top + plotH - y).toFixed(1)}" fill="${colors[k]}"><title>${k} ${ms} ms</title></rect>`;
    });
    out += `<text x="${(x + gw * 0.35).toFixed(1)}" y="${top + plotH + 16}" text-anchor="middle">${esc(g.name)} ${g.rate}/s</text>`;
  });
  out += `<text x="${left}" y="${top - 8}"><tspan fill="${colors.p50}">■ p50</tspan>  <tspan fill="${colors.p99}">■ p99</tspan>  <tspan fill="${colors.p999}">■ p99.9</tspan> (latency from the time each request was due, log scale)</text>`;
  return { svg: out, height: plotH + 80 };
}

/**
 * @param {import('./run.js').FullRunResults & { summary: import('./run.js').Summary }} r
 * @param {string} path
 */
export function writeChart(r, path) {
  const s = r.summary;
  const m = r.machine;
  /** @type {string[]} */
  const parts = [];
  let y = 60;
  /** @param {Chart} chart */
  const add = (chart) => {
    parts.push(chart.svg);
    y += chart.height + 10;
  };
  add(
    hbars(
      y,
      'Throughput on PostgreSQL, and the floors measured in the same run',
      [
        { label: 'bare Fastify + signature check (floor)', value: s.bareHttpFloorPerS, color: '#bab0ac' },
        { label: 'SQL writes of a settled intent (floor)', value: s.sqlFloorWritesPerS, color: '#bab0ac' },
        { label: 'SQL writes, 32 intents per transaction', value: s.sqlFloorGroupCommitPerS, color: '#bab0ac' },
        { label: 'SQL writes + reads of an intent', value: s.sqlFloorWithReadsPerS, color: '#bab0ac' },
        { label: 'POST /intents P2P settled (HTTP)', value: s.postgresP2pSaturatedPerS, color: '#4c78a8' },
        { label: 'P2P settled, 200,000 intents stored', value: s.p2pAfter200kPerS, color: '#4c78a8' },
        { label: 'invoice issue + confirm pairs', value: s.invoicePairsSaturatedPerS, color: '#72b7b2' },
        { label: 'POST /policies/evaluate (1,000 policies)', value: s.policyEvaluationsPerS, color: '#54a24b' },
        { label: 'P2P settled on embedded PGlite', value: s.pgliteP2pSaturatedPerS, color: '#eeca3b' },
        ...s.pgliteWithRefusals.map((x) => ({
          label: `PGlite P2P settled, ${x.refusedShare * 100} % refused`,
          value: x.settledPerS,
          color: '#eeca3b',
        })),
      ],
      '/s',
    ),
  );
  /**
   * @param {string} name
   * @param {readonly import('./load.js').LoadResult[]} list
   * @returns {Series}
   */
  const series = (name, list) => ({ name, points: list.map((x) => ({ rate: x.offeredPerS, ...x.latencyMs })) });
  add(
    latencyChart(y, 'Latency at fixed offered rates (open loop, PostgreSQL)', [
      series('P2P', r.postgres.p2pLatency),
      series('invoice pair', r.postgres.invoiceLatency),
    ]),
  );
  const header = `<text x="20" y="24" class="t">payorch npm run bench — ${esc(r.startedAt.slice(0, 16))}Z</text>
<text x="20" y="44">${esc(m.cpuModel)}, ${m.cores} cores, ${m.memoryGb} GB; node ${esc(m.node)}; commit ${esc(m.gitCommit.slice(0, 10))}${m.gitDirty ? ' (+ uncommitted changes)' : ''}; load avg at start ${esc(r.loadAvgAtStart.join(' '))}</text>`;
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y + 10}" viewBox="0 0 ${W} ${y + 10}" font-family="sans-serif" font-size="12">
<style>.t{font-size:16px;font-weight:bold}.h{font-size:14px;font-weight:bold}</style>
<rect width="100%" height="100%" fill="white"/>
${header}
${parts.join('\n')}
</svg>
`;
  writeFileSync(path, svg);
}
