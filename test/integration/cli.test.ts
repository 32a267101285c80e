import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPayorchClient } from '@payorch/client';
import { COMMAND_WORDS } from '../../src/cli/completion.js';
import { type CliIo, EXIT, runCli } from '../../src/cli/main.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';

/** User ids of this file only: the payer lock is database-wide on a shared PostgreSQL server. */
const [USER, OTHER] = [7201, 7202] as const;
const MERCHANT = 7203;
const WALLET = `user.${USER}.THB`;

let t: TestApp;
let url: string;

beforeAll(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

interface Run {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** runCli in-process against the live listener, with the demo CONFIG_FILE's secrets (as the test app). */
async function cli(argv: readonly string[], io: Partial<CliIo> = {}): Promise<Run> {
  let out = '';
  let err = '';
  const code = await runCli(argv, {
    out: (text) => {
      out += text;
    },
    err: (text) => {
      err += text;
    },
    env: { PAYORCH_URL: url },
    sleep: async () => {},
    ...io,
  });
  return { code, out, err };
}

const json = (run: Run): Record<string, unknown> => JSON.parse(run.out) as Record<string, unknown>;
const wallet = '--service=wallet-api';

async function topUp(amount: number): Promise<string> {
  const run = await cli(['intents', 'create', '--type', 'QP_TOPUP', '--amount', String(amount), '--user', String(USER), wallet, '--json']);
  expect(run.code, run.err).toBe(EXIT.OK);
  return json(run).intentId as string;
}

async function issueInvoice(amount: number, live = false): Promise<string> {
  const merchant = await cli(['accounts', 'create', String(MERCHANT), '--entity', 'merchant', '--service', 'admin-tool', '--json']);
  expect(merchant.code, merchant.err).toBe(EXIT.OK);
  const toLedgerAccountId = (json(merchant).primary as { ledgerAccountId: string }).ledgerAccountId;
  const run = await cli([
    'intents',
    'create',
    JSON.stringify({ operationType: 'INVOICE_PAYMENT', amount, toLedgerAccountId, live }),
    '--user',
    String(MERCHANT),
    wallet,
    '--json',
  ]);
  expect(run.code, run.err).toBe(EXIT.OK);
  expect(json(run).status).toBe('CREATED');
  return json(run).intentId as string;
}

describe('accounts', () => {
  it('create: a table by default, the wire JSON with --json; idempotent', async () => {
    const human = await cli(['accounts', 'create', String(USER), wallet]);
    expect(human).toMatchObject({ code: EXIT.OK, err: '' });
    expect(human.out).toMatch(new RegExp(`^accountName\\s+${WALLET.replaceAll('.', '\\.')}\\nledgerAccountId\\s+[0-9a-f-]{36}\\n$`));
    const again = await cli(['accounts', 'create', String(USER), wallet, '--json']);
    expect(again.code).toBe(EXIT.OK);
    expect(json(again)).toEqual({ accountName: WALLET, ledgerAccountId: expect.any(String) });
  });

  it('balance and history after a top-up', async () => {
    await cli(['accounts', 'create', String(USER), wallet]);
    const intentId = await topUp(10_000);
    const balance = await cli(['accounts', 'balance', WALLET, wallet]);
    expect(balance.code).toBe(EXIT.OK);
    expect(balance.out).toContain(`accountName  ${WALLET}`);
    expect(balance.out).toMatch(/balance\s+[0-9,]+\.[0-9]{2} THB/);
    expect(json(await cli(['accounts', 'balance', WALLET, wallet, '--json']))).toMatchObject({
      accountName: WALLET,
      currency: 'THB',
      balance: expect.stringMatching(/^[0-9]+$/),
    });

    const history = await cli(['accounts', 'history', WALLET, '--limit', '1', wallet]);
    expect(history.code).toBe(EXIT.OK);
    const [header, rule, row, ...rest] = history.out.trimEnd().split('\n');
    expect(header).toMatch(/^createdAt\s+operationType\s+direction\s+amount\s+fee\s+intentId$/);
    expect(rule).toMatch(/^-+( +-+)+$/);
    expect(row).toContain('QP_TOPUP');
    expect(row).toContain('100.00 THB');
    expect(row).toContain(intentId);
    expect(rest).toEqual([]);
    const machine = json(await cli(['accounts', 'history', WALLET, '--limit', '1', wallet, '--json']));
    expect(machine.transactions).toEqual([expect.objectContaining({ intentId, direction: 'CREDIT', amount: '10000' })]);
  });

  it('statement: csv to stdout (for > file), camt053, json as a table; a reversed range is refused', async () => {
    await cli(['accounts', 'create', String(USER), wallet]);
    const from = new Date(Date.now() - 1).toISOString();
    const intentId = await topUp(2_500);
    await new Promise((resolve) => setTimeout(resolve, 10));
    const to = new Date().toISOString();
    const csv = await cli(['accounts', 'statement', WALLET, '--from', from, '--to', to, '--format', 'csv', wallet]);
    expect(csv.code, csv.err).toBe(EXIT.OK);
    expect(csv.out.split('\r\n')).toEqual([
      'at,intentId,refundId,operationType,direction,amount,feeAmount,balanceAfter',
      expect.stringContaining(`,${intentId},,QP_TOPUP,CREDIT,2500,0,`),
      '',
    ]);
    const camt = await cli(['accounts', 'statement', WALLET, '--from', from, '--to', to, '--format', 'camt053', wallet]);
    expect(camt.out).toContain(`<NtryRef>${intentId}</NtryRef><Amt Ccy="THB">25.00</Amt><CdtDbtInd>CRDT</CdtDbtInd>`);
    const table = await cli(['accounts', 'statement', WALLET, '--from', from, '--to', to, wallet]);
    expect(table.out).toMatch(/^at\s+operationType\s+direction\s+amount\s+fee\s+balanceAfter\s+intentId$/m);
    expect(table.out).toContain(intentId);
    const reversed = await cli(['accounts', 'statement', WALLET, '--from', to, '--to', from, '--format', 'csv', wallet]);
    expect(reversed.code).toBe(EXIT.REFUSED);
    expect(reversed.err).toMatch(/^payorch: 422 VALIDATION_ERROR: /);
    expect(reversed.out).toBe('');
  });

  it('history with a limit out of range is refused by the service: exit 1, the error on stderr', async () => {
    const run = await cli(['accounts', 'history', WALLET, '--limit', '500', wallet]);
    expect(run.code).toBe(EXIT.REFUSED);
    expect(run.err).toMatch(/^payorch: 422 VALIDATION_ERROR: /);
    expect(run.out).toBe('');
  });
});

describe('intents', () => {
  it('create, get, events', async () => {
    await cli(['accounts', 'create', String(USER), wallet]);
    await cli(['accounts', 'create', String(OTHER), wallet]);
    await topUp(5_000);
    const created = await cli([
      'intents',
      'create',
      '--type',
      'P2P_TRANSFER',
      '--amount',
      '1500',
      '--recipient',
      String(OTHER),
      '--comment',
      'lunch',
      '--user',
      String(USER),
      wallet,
    ]);
    expect(created.code, created.err).toBe(EXIT.OK);
    expect(created.out).toMatch(/^status\s+SETTLED$/m);
    const intentId = /^intentId\s+(\S+)$/m.exec(created.out)?.[1] ?? '';

    const get = await cli(['intents', 'get', intentId, wallet]);
    expect(get.code).toBe(EXIT.OK);
    expect(get.out).toMatch(/^amount\s+15\.00 THB$/m);
    expect(get.out).toMatch(new RegExp(`^to\\s+user\\.${OTHER}\\.THB$`, 'm'));
    expect(json(await cli(['intents', 'get', intentId, wallet, '--json']))).toMatchObject({ intentId, status: 'SETTLED', amount: '1500' });

    const events = await cli(['intents', 'events', intentId, wallet]);
    expect(events.code).toBe(EXIT.OK);
    expect(
      events.out
        .split('\n')
        .slice(2, 6)
        .map((line) => line.trim().split(/\s+/).slice(2, 4)),
    ).toEqual([
      ['-', 'CREATED'],
      ['CREATED', 'VALIDATED'],
      ['VALIDATED', 'AUTHORIZED'],
      ['AUTHORIZED', 'SETTLED'],
    ]);
    const machine = json(await cli(['intents', 'events', intentId, wallet, '--json']));
    expect((machine.events as Array<{ statusTo: string }>).map((event) => event.statusTo)).toEqual([
      'CREATED',
      'VALIDATED',
      'AUTHORIZED',
      'SETTLED',
    ]);
  });

  it('get of an unknown intent: exit 1; --json prints the error body', async () => {
    const run = await cli(['intents', 'get', randomUUID(), wallet]);
    expect(run.code).toBe(EXIT.REFUSED);
    expect(run.err).toBe('payorch: 404 NOT_FOUND: intent not found\n');
    const machine = await cli(['intents', 'get', randomUUID(), wallet, '--json']);
    expect(machine.code).toBe(EXIT.REFUSED);
    expect(json(machine)).toEqual({ error: 'NOT_FOUND', message: 'intent not found' });
  });

  it('create refused by the key: exit 1 with 403 FORBIDDEN', async () => {
    const run = await cli([
      'intents',
      'create',
      '--type',
      'QP_TOPUP',
      '--amount',
      '100',
      '--user',
      String(USER),
      '--service',
      'mobile-gateway',
    ]);
    expect(run.code).toBe(EXIT.REFUSED);
    expect(run.err).toMatch(/^payorch: 403 FORBIDDEN/);
  });

  it('watch of a settled intent prints SETTLED and exits 0 (stream, and --poll)', async () => {
    await cli(['accounts', 'create', String(USER), wallet]);
    const intentId = await topUp(100);
    const streamed = await cli(['intents', 'watch', intentId, wallet]);
    expect(streamed.code, streamed.err).toBe(EXIT.OK);
    expect(streamed.out).toMatch(/^\S+Z {2}SETTLED\n$/);
    const polled = await cli(['intents', 'watch', intentId, '--poll', wallet, '--json']);
    expect(polled.code).toBe(EXIT.OK);
    expect(
      polled.out
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as unknown),
    ).toEqual([{ intentId, status: 'SETTLED', updatedAt: expect.any(String) }]);
  });

  /** Starts a watch with real waits, cancels the invoice once the watch runs, returns the watch's run. */
  async function watchCancel(intentId: string, args: readonly string[]): Promise<Run> {
    const watching = cli(['intents', 'watch', intentId, '--json', wallet, ...args], {
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const secret = t.secrets.get('wallet-api')?.[0] ?? '';
    const cancel = await createPayorchClient({ baseUrl: url, serviceId: 'wallet-api', secret }).intents.cancel(
      intentId,
      {},
      { userId: MERCHANT },
    );
    expect(cancel.status).toBe('CANCELED');
    return watching;
  }

  const statuses = (run: Run) =>
    run.out
      .trimEnd()
      .split('\n')
      .map((line) => (JSON.parse(line) as { status: string }).status);

  it('watch of a live intent gets the transition from the stream, long before the next poll', async () => {
    const run = await watchCancel(await issueInvoice(500, true), ['--interval-ms', '20000', '--timeout-s', '25']);
    expect(run.code, run.err).toBe(EXIT.OK);
    expect(statuses(run)).toEqual(['CREATED', 'CANCELED']);
  });

  it('watch of an intent without live messages: the polls see the transition (stream open, and --poll)', async () => {
    for (const mode of [[], ['--poll']]) {
      const run = await watchCancel(await issueInvoice(500), ['--interval-ms', '20', ...mode]);
      expect(run.code, run.err).toBe(EXIT.OK);
      expect(statuses(run)).toEqual(['CREATED', 'CANCELED']);
    }
  });

  it('watch that outlives its timeout exits 3', async () => {
    const intentId = await issueInvoice(400);
    const run = await cli(['intents', 'watch', intentId, '--timeout-s', '1', '--interval-ms', '100', '--poll', wallet]);
    expect(run.code).toBe(EXIT.SERVER);
    expect(run.out).toMatch(/ {2}CREATED\n$/);
    expect(run.err).toContain(`intent ${intentId} still CREATED`);
  });
});

describe('quote, policies, admin, audit, call', () => {
  it('quote: the fee, the total and the breakdown', async () => {
    const run = await cli(['quote', '--type', 'WITHDRAWAL', '--amount', '5000', wallet]);
    expect(run.code).toBe(EXIT.OK);
    expect(run.out).toMatch(/^fee\s+10\.00 THB\ntotalCharge\s+60\.00 THB\n\naccount\s+amount\n/);
    expect(run.out).toMatch(/system\.revenue\.THB\s+10\.00 THB\n$/);
    expect(json(await cli(['quote', '--type', 'WITHDRAWAL', '--amount', '5000', wallet, '--json']))).toEqual({
      fee: '1000',
      totalCharge: '6000',
      breakdown: [{ account: 'system.revenue.THB', amount: '1000' }],
    });
  });

  it('policies evaluate', async () => {
    const args = [
      'policies',
      'evaluate',
      '--user',
      String(USER),
      '--amount',
      '100',
      '--channel',
      'app',
      '--app',
      'wallet',
      '--type',
      'P2P_TRANSFER',
      wallet,
    ];
    const run = await cli(args);
    expect(run.code, run.err).toBe(EXIT.OK);
    expect(run.out).toMatch(/^required\s+[A-Z_]+\nreasonCode\s+\S+\npolicyId\s+[0-9]+\ndailyCumulative\s+[0-9]+\nisNewPayee\s+false\n$/);
    expect(json(await cli([...args, '--json']))).toMatchObject({ required: expect.any(String), context: { isNewPayee: false } });
  });

  it('admin resolve: 200 with previousStatus for a settled intent, 422 WRONG_STATUS (exit 1) for a CREATED one', async () => {
    await cli(['accounts', 'create', String(USER), wallet]);
    const settled = await topUp(100);
    const run = await cli(['admin', 'resolve', settled, 'confirmed', '--service', 'admin-tool', '--json']);
    expect(run.code, run.err).toBe(EXIT.OK);
    expect(json(run)).toMatchObject({ intentId: settled, previousStatus: 'SETTLED', status: 'SETTLED' });

    const invoice = await issueInvoice(300);
    const refused = await cli(['admin', 'resolve', invoice, 'FAILED', '--reason', 'test', '--service', 'admin-tool']);
    expect(refused.code).toBe(EXIT.REFUSED);
    expect(refused.err).toMatch(/^payorch: 422 WRONG_STATUS/);
    const forbidden = await cli(['admin', 'resolve', invoice, 'FAILED', wallet]);
    expect([forbidden.code, forbidden.err.startsWith('payorch: 403 FORBIDDEN')]).toEqual([EXIT.REFUSED, true]);
  });

  it('audit: every invariant holds', async () => {
    const run = await cli(['audit', '--service', 'admin-tool']);
    expect(run.code, run.err).toBe(EXIT.OK);
    expect(run.out).toMatch(/^ok: every invariant holds/);
    expect(json(await cli(['audit', '--service', 'admin-tool', '--json']))).toMatchObject({ ok: true, violations: [] });
  });

  it('audit with violations exits 4 and lists them', async () => {
    const fetchFinding: typeof fetch = async () =>
      new Response(
        JSON.stringify({
          ok: false,
          checkedAt: '2025-01-01T00:00:00.000Z',
          violations: [{ check: 'transit_balanced', account: 'system.transit.PSPX.THB', detail: 'net -5' }],
        }),
        {
          status: 200,
          headers: { 'content-type': 'application/json' },
        },
      );
    const run = await cli(['audit', '--service', 'admin-tool'], { fetch: fetchFinding });
    expect(run.code).toBe(EXIT.VIOLATIONS);
    expect(run.out).toContain('1 violation(s)');
    expect(run.out).toMatch(/transit_balanced\s+system\.transit\.PSPX\.THB\s+net -5/);
  });

  it('call: the README commands still work and print the status line', async () => {
    const created = await cli([
      'call',
      'POST',
      '/accounts',
      JSON.stringify({ userId: USER, currency: 'THB' }),
      wallet,
      '--user',
      String(USER),
    ]);
    expect(created.code).toBe(EXIT.OK);
    expect(created.out).toMatch(/^20[01] (OK|Created)\n\{/);
    const balance = await cli(['call', 'GET', `/accounts/${WALLET}/balance`, wallet]);
    expect(balance.code).toBe(EXIT.OK);
    expect(balance.out.split('\n')[0]).toBe('200 OK');
    expect(JSON.parse(balance.out.slice(balance.out.indexOf('\n') + 1))).toMatchObject({ accountName: WALLET, currency: 'THB' });
    const missing = await cli(['call', 'GET', `/intents/${randomUUID()}`, wallet]);
    expect(missing.code).toBe(EXIT.REFUSED);
    expect(missing.out.split('\n')[0]).toBe('404 Not Found');
  });
});

describe('admin records and log level', () => {
  const admin = ['--service', 'admin-tool'];

  it('creates, lists, reads, changes and deactivates a fee rule, each change kept by the service', async () => {
    const name = `cli-${randomUUID()}`;
    const body = JSON.stringify({ name, operationType: 'MINIAPP_CREDIT', expression: '[]', active: false });
    const created = await cli(['admin', 'fee-rules', 'create', body, ...admin, '--json']);
    expect(created.code, created.err).toBe(EXIT.OK);
    const id = String(json(created).id);
    const listed = await cli(['admin', 'fee-rules', 'list', '--active', 'false', ...admin]);
    expect(listed.code, listed.err).toBe(EXIT.OK);
    expect(listed.out).toContain(name);
    const updated = await cli(['admin', 'fee-rules', 'update', id, '{"priority": 7}', ...admin, '--json']);
    expect([updated.code, json(updated).priority]).toEqual([EXIT.OK, 7]);
    const read = await cli(['admin', 'fee-rules', 'get', id, ...admin]);
    expect(read.out).toMatch(/priority\s+7/);
    const deleted = await cli(['admin', 'fee-rules', 'delete', id, ...admin, '--json']);
    expect([deleted.code, json(deleted).active]).toEqual([EXIT.OK, false]);
    const { rows } = await t.db.query<{ priority: number }>('SELECT priority FROM fee_rules WHERE name = $1', [name]);
    expect(rows).toEqual([{ priority: 7 }]);
  });

  it('lists every kind of record, and refuses a bad body or verb before sending anything', async () => {
    for (const records of ['fee-rules', 'routes', 'limit-rules', 'auth-policies', 'service-keys']) {
      const run = await cli(['admin', records, 'list', ...admin, '--json']);
      expect(run.code, `${records}: ${run.err}`).toBe(EXIT.OK);
    }
    const refused = await cli(['admin', 'routes', 'create', '{"operationType": "P2P_TRANSFER", "channel": "MERCHANT_INVOICE"}', ...admin]);
    expect([refused.code, refused.err]).toEqual([EXIT.REFUSED, expect.stringContaining('422 VALIDATION_ERROR')]);
    const noCall = { fetch: async () => Promise.reject(new Error('a usage error must not call the service')) };
    expect((await cli(['admin', 'routes', 'create', 'not json', ...admin], noCall)).code).toBe(EXIT.USAGE);
    expect((await cli(['admin', 'routes', 'frobnicate', ...admin], noCall)).err).toContain('unknown command: admin routes frobnicate');
    expect((await cli(['admin', 'routes', 'get', ...admin], noCall)).code).toBe(EXIT.USAGE);
    // A key is one path segment: slashes in it are sent encoded and cannot reach another route.
    const escaping = await cli(['admin', 'routes', 'get', '../../intents', ...admin]);
    expect([escaping.code, escaping.err]).toEqual([EXIT.REFUSED, expect.stringContaining('422 VALIDATION_ERROR')]);
    const otherKey = await cli(['admin', 'service-keys', 'get', 'x/../admin-tool', ...admin]);
    expect(otherKey.code).toBe(EXIT.REFUSED);
  });

  it('reads and switches the log level', async () => {
    const before = await cli(['admin', 'log-level', ...admin, '--json']);
    expect(before.code, before.err).toBe(EXIT.OK);
    const level = String(json(before).level);
    const switched = await cli(['admin', 'log-level', 'debug', ...admin, '--json']);
    expect([switched.code, json(switched).level]).toEqual([EXIT.OK, 'debug']);
    const back = await cli(['admin', 'log-level', level === 'silent' ? 'info' : level, ...admin]);
    expect(back.code, back.err).toBe(EXIT.OK);
  });
});

describe('signatures', () => {
  /** Records the headers of every request the CLI sends, then sends it. */
  function recording() {
    const sent: Array<Record<string, string>> = [];
    const stub: typeof fetch = (input, init) => {
      sent.push(Object.fromEntries(new Headers(init?.headers).entries()));
      return fetch(input, init);
    };
    return { sent, stub };
  }

  it('signs with an HTTP Message Signature by default, X-User-Id covered', async () => {
    const { sent, stub } = recording();
    const run = await cli(
      ['call', 'POST', '/accounts', JSON.stringify({ userId: USER, currency: 'THB' }), wallet, '--user', String(USER)],
      { fetch: stub },
    );
    expect(run.code, run.out).toBe(EXIT.OK);
    expect(sent[0]?.['x-signature']).toBeUndefined();
    expect(sent[0]?.['signature-input']).toMatch(/^sig1=\("@method" "@path" "@query" "content-digest" "x-user-id"\);created=/);
  });

  it('--legacy-signature signs with X-Signature', async () => {
    const { sent, stub } = recording();
    const run = await cli(['accounts', 'balance', WALLET, wallet, '--legacy-signature'], { fetch: stub });
    expect(run.code, run.err).toBe(EXIT.OK);
    expect(sent[0]?.['x-signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(sent[0]?.['signature-input']).toBeUndefined();
  });
});

describe('exit codes for what failed', () => {
  it('2 for usage errors, before anything is sent', async () => {
    const cases: Array<[readonly string[], RegExp]> = [
      [['nonsense'], /unknown command: nonsense/],
      [['intents', 'frobnicate'], /unknown command: intents frobnicate\nRun 'payorch intents --help' for its usage/],
      [['intents'], /intents needs a subcommand/],
      [['policies'], /policies needs a subcommand/],
      [['accounts', 'balance', WALLET], /--service ID is required/],
      [['accounts', 'balance', WALLET, '--service', 'nobody'], /no secret for service nobody/],
      [['intents', 'create', '--type', 'QP_TOPUP', '--amount', '1', wallet], /needs --user N/],
      [['intents', 'create', '--type', 'QP_TOPUP', '--amount', 'ten', '--user', '1', wallet], /--amount must be an integer/],
      [['intents', 'create', '--type', 'NOPE', '--amount', '1', '--user', '1', wallet], /--type must be one of/],
      [['intents', 'get', wallet], /usage: payorch intents get ID/],
      [['accounts', 'balance', WALLET, wallet, '--bogus'], /Unknown option '--bogus'/],
      [['intents', 'watch', randomUUID(), '--interval-ms', '1', wallet], /--interval-ms must be >= 10/],
      [['admin', 'resolve', randomUUID(), 'MAYBE', wallet], /usage: payorch admin resolve/],
      [['call', 'FETCH', '/health', wallet], /usage: payorch call/],
    ];
    for (const [argv, message] of cases) {
      const run = await cli(argv);
      expect(run.code, argv.join(' ')).toBe(EXIT.USAGE);
      expect(run.err, argv.join(' ')).toMatch(message);
      expect(run.out, argv.join(' ')).toBe('');
    }
  });

  it('0 with the usage for help', async () => {
    const run = await cli(['help']);
    expect(run.code).toBe(EXIT.OK);
    expect(run.out).toContain('payorch intents watch ID');
  });

  it("0 with one command's usage for COMMAND --help, at any depth, and nothing sent", async () => {
    const commands = ['serve', 'migrate', 'call', 'intents', 'quote', 'accounts', 'policies', 'admin', 'audit', 'completion'];
    for (const command of commands) {
      for (const argv of [
        [command, '--help'],
        [command, '-h'],
      ]) {
        const run = await cli(argv, { fetch: async () => Promise.reject(new Error('help must not call the service')) });
        expect([run.code, run.err], argv.join(' ')).toEqual([EXIT.OK, '']);
        expect(run.out, argv.join(' ')).toMatch(new RegExp(`^Usage:\n  payorch ${command}\\b`));
        // Only this command's lines: every usage line names it.
        for (const line of run.out.split('\n').filter((l) => l.startsWith('  payorch ')))
          expect(line).toMatch(new RegExp(`^  payorch ${command}\\b`));
        expect(run.out.includes('--service ID'), argv.join(' ')).toBe(!['serve', 'migrate', 'completion'].includes(command));
      }
    }
    const nested = await cli(['intents', 'create', '--help']);
    expect(nested.code).toBe(EXIT.OK);
    expect(nested.out).toContain('payorch intents create [BODY] --user N --type T --amount N');
  });

  it('signs with PAYORCH_SECRET or PAYORCH_SECRET_FILE instead of reading CONFIG_FILE', async () => {
    const demoSecret = 'demo-wallet-api-secret-change-me';
    const noConfig = { PAYORCH_URL: url, CONFIG_FILE: '/nonexistent/config.json', PAYORCH_SERVICE: 'wallet-api' };
    const bySecret = await cli(['accounts', 'balance', WALLET], { env: { ...noConfig, PAYORCH_SECRET: demoSecret } });
    expect(bySecret.code, bySecret.err).toBe(EXIT.OK);
    const file = join(mkdtempSync(join(tmpdir(), 'payorch-cli-')), 'secret');
    writeFileSync(file, `${demoSecret}\n`);
    const byFile = await cli(['accounts', 'balance', WALLET], { env: { ...noConfig, PAYORCH_SECRET_FILE: file } });
    expect(byFile.code, byFile.err).toBe(EXIT.OK);
    const wrong = await cli(['accounts', 'balance', WALLET], { env: { ...noConfig, PAYORCH_SECRET: 'not-the-secret' } });
    expect([wrong.code, wrong.err]).toEqual([EXIT.REFUSED, expect.stringContaining('401 UNAUTHORIZED')]);
    const missing = await cli(['accounts', 'balance', WALLET], { env: { ...noConfig, PAYORCH_SECRET_FILE: `${file}.absent` } });
    expect([missing.code, missing.err]).toEqual([EXIT.USAGE, expect.stringContaining('cannot be read (ENOENT)')]);
  });

  it('sends ADMIN_TOKEN as a bearer token with --admin-token or PAYORCH_ADMIN_TOKEN when no service is named', async () => {
    const byFlag = await cli(['audit', '--admin-token', 'test-admin-token', '--json']);
    expect(byFlag.code, byFlag.err).toBe(EXIT.OK);
    expect(json(byFlag).ok).toBe(true);
    const byEnv = await cli(['audit', '--json'], { env: { PAYORCH_URL: url, PAYORCH_ADMIN_TOKEN: 'test-admin-token' } });
    expect(byEnv.code, byEnv.err).toBe(EXIT.OK);
    const wrong = await cli(['audit', '--admin-token', 'not-the-token']);
    expect([wrong.code, wrong.err]).toEqual([EXIT.REFUSED, expect.stringContaining('401 UNAUTHORIZED')]);
    const neither = await cli(['audit']);
    expect([neither.code, neither.err]).toEqual([EXIT.USAGE, expect.stringContaining('--admin-token')]);
  });

  it('prints a bash completion that completes commands, subcommands, record verbs and options', async () => {
    const script = (await cli(['completion', 'bash'])).out;
    const complete = (...words: string[]) =>
      execFileSync(
        'bash',
        [
          '-c',
          `${script}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _payorch; echo "\${COMPREPLY[*]}"`,
        ],
        {
          encoding: 'utf8',
        },
      ).trim();
    expect(complete('payorch', 'int')).toBe('intents');
    expect(complete('payorch', 'intents', '')).toBe('create get events watch');
    expect(complete('payorch', 'admin', 'fee-rules', '')).toBe('list get create update delete');
    expect(complete('payorch', 'audit', '--adm')).toBe('--admin-token');
    expect((await cli(['completion', 'zsh'])).out).toContain('bashcompinit');
    expect((await cli(['completion', 'fish'])).code).toBe(EXIT.USAGE);
  });

  it('completes only subcommands the dispatchers know', async () => {
    const noCall = { fetch: async () => Promise.reject(new Error('must not call the service')) };
    for (const command of ['intents', 'accounts', 'policies', 'admin']) {
      for (const word of COMMAND_WORDS[command] ?? []) {
        const run = await cli([command, word], noCall);
        expect(run.err, `${command} ${word}`).not.toContain('unknown command');
      }
    }
    for (const verb of ['list', 'get', 'create', 'update', 'delete']) {
      expect((await cli(['admin', 'routes', verb], noCall)).err, verb).not.toContain('unknown command');
    }
  });

  it('0 with the package version for --version', async () => {
    const run = await cli(['--version']);
    expect(run.code).toBe(EXIT.OK);
    expect(run.out).toMatch(/^payorch \d+\.\d+\.\d+\n$/);
  });

  it('3 for a server error, after the retries', async () => {
    let calls = 0;
    const failing: typeof fetch = async () => {
      calls += 1;
      return new Response(JSON.stringify({ error: 'INTERNAL_ERROR', message: 'boom' }), {
        status: 500,
        headers: { 'content-type': 'application/json' },
      });
    };
    const run = await cli(['accounts', 'balance', WALLET, wallet], { fetch: failing });
    expect(run.code).toBe(EXIT.SERVER);
    expect(run.err).toBe('payorch: 500 INTERNAL_ERROR: boom\n');
    expect(calls).toBe(3);
  });

  it('3 when the service cannot be reached; --json says UNREACHABLE', async () => {
    const run = await cli(['accounts', 'balance', WALLET, wallet, '--url', 'http://127.0.0.1:1', '--json']);
    expect(run.code).toBe(EXIT.SERVER);
    expect(json(run)).toMatchObject({ error: 'UNREACHABLE' });
    expect(run.err).toMatch(/no answer after 3 attempt\(s\)/);
  });
});
