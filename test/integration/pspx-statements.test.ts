/** The statement call of the PSPX contract, between the real client and the simulator over HTTP (docs/PSPX.md, Statements). */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { createSimulatorServer, type SimulatorServer } from '../../src/adapters/pspx/pspx-simulator.js';
import { bangkokSettlementDate } from '../../src/adapters/pspx/settlement-calendar.js';
import type { StatementLine, StatementSink } from '../../src/adapters/pspx/statement-reader.js';

let server: SimulatorServer;
beforeAll(async () => {
  server = await createSimulatorServer({ adminRoutes: true, initialBalance: 1_000_000n });
});
afterAll(async () => server?.close());

const client = () => createPspxClient({ baseUrl: server.url, timeoutMs: 500, backoffBaseMs: 1, backoffCapMs: 2 });

async function plant(request: Record<string, unknown>) {
  return fetch(`${server.url}/_sim/statement`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(request),
  });
}

describe('GET /v1/statements/{date}', () => {
  it('is not closed (404) for today until POST /_sim/statement closes it', async () => {
    const today = bangkokSettlementDate();
    const lines: StatementLine[] = [];
    const sink: StatementSink = { begin: async () => void lines.splice(0), lines: async (batch) => void lines.push(...batch) };
    expect(await client().statement(today, sink)).toEqual({ kind: 'not_closed' });
    expect((await plant({ date: today, close: true })).status).toBe(200);
    expect(await client().statement(today, sink)).toMatchObject({ kind: 'closed', header: { date: today, lineCount: 0 } });
  });

  it('streams a paid payout and planted lines with exact amounts, and the balances they make', async () => {
    const date = '20250301';
    const intentId = randomUUID();
    server.simulator.setSettlementDate(date);
    server.simulator.inquiry(intentId, { amount: '1500', currency: 'THB', receiverType: 'MSISDN', receiverAccount: '0812345678' });
    const ref = server.simulator.inquiry(intentId, {
      amount: '1500',
      currency: 'THB',
      receiverType: 'MSISDN',
      receiverAccount: '0812345678',
    }).body.inquiryRef;
    server.simulator.confirm(intentId, ref);
    server.simulator.setSettlementDate(null);
    expect((await plant({ date, addLine: { type: 'FEE', amount: '25' } })).status).toBe(200);
    expect((await plant({ date, addLine: { type: 'RETURN', amount: '9000000000000000000', intentId } })).status).toBe(200);
    const lines: StatementLine[] = [];
    const sink: StatementSink = { begin: async () => void lines.splice(0), lines: async (batch) => void lines.push(...batch) };
    const result = await client().statement(date, sink);
    expect(result).toEqual({
      kind: 'closed',
      header: { date, openingBalance: 1_000_000n, closingBalance: 1_000_000n - 1500n - 25n + 9_000_000_000_000_000_000n, lineCount: 3 },
    });
    expect(lines.map(({ intentId: id, type, amount }) => [id, type, amount])).toEqual([
      [intentId, 'PAYOUT', 1500n],
      [null, 'FEE', 25n],
      [intentId, 'RETURN', 9_000_000_000_000_000_000n],
    ]);
  });

  it('a malformed plant is refused 400; a statement outside the contract is invalid, not retried', async () => {
    expect((await plant({ date: '2025-03-02' })).status).toBe(400);
    const date = '20250302';
    await plant({ date, addLine: { type: 'PAYOUT', amount: '1e3', intentId: randomUUID() } });
    let begins = 0;
    const sink: StatementSink = {
      begin: async () => {
        begins += 1;
      },
      lines: async () => {},
    };
    expect(await client().statement(date, sink)).toEqual({ kind: 'invalid', reason: expect.stringContaining('amount') });
    expect(begins).toBe(1);
  });

  it('a provider failing every attempt is unknown after the retries, each attempt begun afresh', async () => {
    server.simulator.failNext(3);
    let begins = 0;
    const sink: StatementSink = {
      begin: async () => {
        begins += 1;
      },
      lines: async () => {},
    };
    expect(await client().statement('20250303', sink)).toMatchObject({ kind: 'unknown', cause: 'http_5xx' });
    expect(begins).toBe(3);
  });
});
