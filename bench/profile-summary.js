// Self time by function (and by file) from a V8 .cpuprofile (node --cpu-prof; npm run bench -- --profile).
// node bench/profile-summary.js <file.cpuprofile> [top]
import { readFileSync } from 'node:fs';

/**
 * The parts of V8's .cpuprofile read here.
 * @typedef {{ id: number, callFrame: { functionName: string, url: string, lineNumber: number } }} ProfileNode
 * @typedef {{ nodes: ProfileNode[], samples: number[], timeDeltas: number[] }} CpuProfile
 */

const [file, topArg] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: node bench/profile-summary.js <file.cpuprofile> [top]');
const top = Number(topArg ?? 25);
/** @type {CpuProfile} */
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
/** @type {Map<number, number>} node id → self time */
const selfUs = new Map();
profile.samples.forEach((id, i) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
/** @type {Map<string, number>} */
const byFunction = new Map();
/** @type {Map<string, number>} */
const byFile = new Map();
for (const [id, us] of selfUs) {
  const node = byId.get(id);
  if (node === undefined) throw new Error(`${file}: a sample of node ${id}, which the profile does not list`);
  const { callFrame } = node;
  const where = callFrame.url.replace(/^file:\/\/.*?\/(node_modules|dist)\//, '$1/') || '(native)';
  const key = `${callFrame.functionName || '(anonymous)'}  ${where}:${callFrame.lineNumber + 1}`;
  byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  const pkg = where.startsWith('node_modules/')
    ? where
        .split('/')
        .slice(0, where.includes('/@') ? 3 : 2)
        .join('/')
    : where.split('/').slice(0, 2).join('/');
  byFile.set(pkg, (byFile.get(pkg) ?? 0) + us);
}
/** @param {number} us */
const pct = (us) => `${((us / total) * 100).toFixed(1)}%`.padStart(6);
console.log(`total ${(total / 1e6).toFixed(1)} s sampled\n\nby package / directory:`);
for (const [k, us] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(pct(us), k);
console.log('\nby function (self):');
for (const [k, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(pct(us), k);
