// Self time by function (and by file) from a V8 .cpuprofile (node --cpu-prof; npm run bench -- --profile).
// node bench/profile-summary.js <file.cpuprofile> [top]
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const dt = profile.timeDeltas[i] ?? 0;
  selfUs.set(profile.samples[i], (selfUs.get(profile.samples[i]) ?? 0) + dt);
}
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
const byFunction = new Map();
const byFile = new Map();
for (const [id, us] of selfUs) {
  const { callFrame } = byId.get(id);
  const where = callFrame.url.replace(/^file:\/\/.*?\/(node_modules|dist)\//, '$1/') || '(native)';
  const key = `${callFrame.functionName || '(anonymous)'}  ${where}:${callFrame.lineNumber + 1}`;
  byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  const pkg = where.startsWith('node_modules/') ? where.split('/').slice(0, where.includes('/@') ? 3 : 2).join('/') : where.split('/').slice(0, 2).join('/');
  byFile.set(pkg, (byFile.get(pkg) ?? 0) + us);
}
const pct = (us) => `${((us / total) * 100).toFixed(1)}%`.padStart(6);
console.log(`total ${(total / 1e6).toFixed(1)} s sampled\n\nby package / directory:`);
for (const [k, us] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(pct(us), k);
console.log('\nby function (self):');
for (const [k, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(pct(us), k);
