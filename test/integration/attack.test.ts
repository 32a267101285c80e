import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildIfStale } from '../support/service-process.js';

/**
 * `npm run attack` at its small size (docs/SECURITY.md, Attack run): every probe of the review
 * against a real production-configured `payorch serve`, each with its verdict against
 * docs/rules.md R60-R62. The large size is run by hand; its figures are in docs/SECURITY.md.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));

interface Probe {
  readonly probe: string;
  readonly passed: boolean;
}

describe('npm run attack -- --size small', () => {
  beforeAll(buildIfStale, 120_000);

  it('every probe holds', async () => {
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        ['scripts/attack.js', '--size', 'small'],
        { cwd: root, maxBuffer: 1 << 22 },
        (_error, out, err) => resolve({ code: child.exitCode, stdout: out, stderr: err }),
      );
    });
    expect(stderr).toBe('');
    const { results } = JSON.parse(stdout) as { results: Probe[] };
    expect(results.map((result) => result.probe)).toHaveLength(5);
    for (const result of results) expect(result, JSON.stringify(result)).toMatchObject({ passed: true });
    expect(code).toBe(0);
  }, 240_000);
});
