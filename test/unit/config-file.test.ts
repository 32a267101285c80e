import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEMO_CONFIG_FILE, readConfigFile } from '../../src/config.js';
import { configFileProblems } from '../../src/domain/bootstrap/config-file.js';

const dir = mkdtempSync(join(tmpdir(), 'payorch-config-'));

function withRoutes(routes: readonly Record<string, unknown>[]): string {
  const file = { ...readConfigFile(DEMO_CONFIG_FILE), routes };
  const path = join(dir, `${routes.length}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(file));
  return path;
}

describe('CONFIG_FILE routes', () => {
  it('refuses to start on a route whose channel cannot carry its operation type, naming the route', () => {
    const path = withRoutes([
      { operationType: 'P2P_TRANSFER', channel: 'INTERNAL_P2P' },
      { operationType: 'INVOICE_PAYMENT', channel: 'INTERNAL_P2P' },
    ]);
    expect(configFileProblems(readConfigFile(path))).toEqual(['routes[1] sends INVOICE_PAYMENT to INTERNAL_P2P, which cannot carry it']);
  });

  it('accepts the shipped route table and a QR payment sent to PSPX payouts', () => {
    const demo = readConfigFile(DEMO_CONFIG_FILE);
    expect(demo.routes?.length).toBeGreaterThan(0);
    expect(configFileProblems(demo)).toEqual([]);
    expect(configFileProblems(readConfigFile(withRoutes([{ operationType: 'THAI_QR_PAY', channel: 'PSPX_TRANSFER' }])))).toEqual([]);
  });
});
