import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import { createOutboxWorker, OUTBOX_DEFAULTS, type OutboxWorker } from '../../src/workers/outbox-worker.js';
import { createPspWorker, type PspWorker } from '../../src/workers/psp-worker.js';
import { CursorSeal } from '../../src/domain/events/cursor-seal.js';
import { createWebhookWorker, WEBHOOK_DEFAULTS } from '../../src/workers/webhook-worker.js';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balance, createUser, topUp } from '../support/payments.js';
import { captureLogger, drain, intentOf, payout, registerIpps, testPspSettings } from '../support/workers.js';

/** Debian's chromium (`apt-get install -y chromium`; .ci/run installs it). Playwright's own browser download does not work here. */
const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOT_PATH = fileURLToPath(new URL('../../docs/console.png', import.meta.url));
const ADMIN_TOKEN = 'test-admin-token';
const USER = 701;
const WALLET = `user.${USER}.THB`;
/** Long enough for the page's 2 s poll to see a change, short enough to fail fast when it never does. */
const UI_TIMEOUT_MS = 10_000;
/**
 * Flags for a root user on a machine without a display or outside network: no sandbox (root),
 * no GPU, and none of Chromium's own background connections (refused here, and slow to fail).
 */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let t: TestApp;
let baseUrl: string;
let browser: Browser;
let psp: PspWorker;
let outbox: OutboxWorker;
/** When the wallet's first posting was made (ms): the statement test's range must hold it. */
let fundedAt = 0;

beforeAll(async () => {
  // A missing browser must fail the run, not skip it: CI would then prove nothing about the console.
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM_PATH}: install it with \`apt-get install -y chromium\` (.ci/run does) or set CHROMIUM_PATH`,
    );
  }
  // 200 ms: the simulator's held confirm (receiver …9998) becomes a client-side time-out quickly.
  t = await startTestApp({ pspx: { timeoutMs: 200 } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const log = captureLogger();
  const client = createPspxClient({ baseUrl: t.pspxSimulator.url, timeoutMs: 200, backoffBaseMs: 1, backoffCapMs: 5 });
  psp = createPspWorker({ db: t.db, pspx: client, log, settings: testPspSettings });
  outbox = createOutboxWorker({
    db: t.db,
    ledger: t.ledger,
    publisher: new StatusPublisher(t.broker, log),
    log,
    settings: { ...OUTBOX_DEFAULTS, backoffBaseMs: 1 },
  });
  await createUser(t, USER);
  await registerIpps(t, USER);
  await topUp(t, USER, 1_000_000);
  fundedAt = Date.now();
  // launch() gives every run a fresh temporary profile (its own --user-data-dir), removed on close.
  browser = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS });
});
afterAll(async () => {
  await browser?.close();
  await outbox?.stop();
  await t?.close();
});
afterEach(async () => expectLedgerInvariants(t.db));

/** Satang as the console shows them. */
const shownMoney = (satang: bigint) => `${(satang / 100n).toLocaleString('en-US')}.${String(satang % 100n).padStart(2, '0')} THB`;

/** A page whose script errors, CSP refusals and failed requests are collected, and which has signed in with the token. */
async function signedInPage(): Promise<{ page: Page; problems: string[]; urls: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.setDefaultTimeout(UI_TIMEOUT_MS);
  const problems: string[] = [];
  const urls: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  page.on('request', (request) => urls.push(request.url()));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`HTTP ${response.status()} ${response.url()}`);
  });
  await page.goto(`${baseUrl}/console`);
  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Open console' }).click();
  await page.getByRole('navigation', { name: 'Sections' }).waitFor();
  return { page, problems, urls };
}

describe('operator console in Chromium', () => {
  it('resolves a MANUAL_REVIEW payout CONFIRMED from the queue and shows it settle, with the SETTLED audit row', async () => {
    const id = await payout(t, USER, '0812349998', 2000);
    await drain(psp, outbox);
    expect((await intentOf(t, id)).status).toBe('MANUAL_REVIEW');

    const { page, problems, urls } = await signedInPage();
    try {
      await page.getByRole('link', { name: 'Manual review' }).click();
      const row = page.locator(`tr[data-intent-id="${id}"]`);
      await row.getByRole('button', { name: 'Resolve CONFIRMED' }).click();
      await row.getByRole('status').filter({ hasText: 'settlement queued' }).waitFor();

      await row.getByRole('link', { name: 'Open intent' }).click();
      const status = page.locator('#intent-status');
      await status.filter({ hasText: 'MANUAL_REVIEW' }).waitFor();
      // The resolution is an outbox job: the page must pick the settlement up on its own.
      await drain(psp, outbox);
      await status.filter({ hasText: 'SETTLED' }).waitFor();
      const timeline = page.getByRole('table', { name: 'Audit timeline, oldest first' });
      const settledRow = timeline.getByRole('row').filter({ hasText: 'MANUAL_REVIEW' }).filter({ hasText: 'SETTLED' });
      await settledRow.waitFor();
      expect(await settledRow.count()).toBe(1);
      expect((await intentOf(t, id)).status).toBe('SETTLED');

      // The README's picture is refreshed on request only, so a test run leaves the tree clean.
      if (process.env.UPDATE_SCREENSHOT === '1') await page.screenshot({ path: SCREENSHOT_PATH, fullPage: true });
      // The token travels in a header only: never in an address the browser requested.
      expect(urls.filter((url) => url.includes(ADMIN_TOKEN))).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('resolves FAILED only with a reason, and the intent fails at once', async () => {
    const id = await payout(t, USER, '0812359998', 1500);
    await drain(psp, outbox);
    const { page, problems } = await signedInPage();
    try {
      await page.goto(`${baseUrl}/console#/intents/${id}`);
      const form = page.getByRole('form', { name: `Resolve intent ${id}` });
      await form.getByRole('button', { name: 'Resolve FAILED' }).click();
      await form.getByRole('alert').filter({ hasText: 'Give a reason' }).waitFor();
      expect((await intentOf(t, id)).status).toBe('MANUAL_REVIEW');

      await form.getByLabel('Reason').fill('provider confirms no payment');
      await form.getByRole('button', { name: 'Resolve FAILED' }).click();
      await page.locator('#intent-status').filter({ hasText: 'FAILED' }).waitFor();
      expect(await intentOf(t, id)).toMatchObject({ status: 'FAILED', failureReason: 'provider confirms no payment' });
      await drain(psp, outbox);
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('looks an account up (balance and history) and shows the invariant audit passing', async () => {
    const { page, problems } = await signedInPage();
    try {
      await page.getByRole('link', { name: 'Accounts' }).click();
      await page.getByLabel('Account name or ledger id').fill(WALLET);
      await page.getByRole('button', { name: 'Look up' }).click();
      const satang = await balance(t, WALLET);
      const shown = `${(satang / 100n).toLocaleString('en-US')}.${String(satang % 100n).padStart(2, '0')} THB`;
      await page.locator('#account-balance').filter({ hasText: shown }).waitFor();
      const history = page.getByRole('table', { name: 'Recent history, newest first' });
      await history.getByRole('row').filter({ hasText: 'QP_TOPUP' }).waitFor();

      await page.getByRole('link', { name: 'Invariant audit' }).click();
      await page.getByRole('status').filter({ hasText: 'All invariants hold' }).waitFor();
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("shows an account's statement with the balances the API answers at its bounds, and downloads it as csv", async () => {
    // The form's instants have minute precision: the range ending now must hold the funding's posting.
    const minute = 60_000;
    if (Math.floor(Date.now() / minute) === Math.floor(fundedAt / minute)) await sleep(minute - (Date.now() % minute) + 200);
    const { page, problems } = await signedInPage();
    try {
      await page.getByRole('link', { name: 'Accounts' }).click();
      await page.getByLabel('Account name or ledger id').fill(WALLET);
      await page.getByRole('button', { name: 'Look up' }).click();
      const form = page.getByRole('form', { name: 'Statement' });
      await form.getByRole('button', { name: 'Show' }).click();
      const postings = page.getByRole('table', { name: 'Postings, oldest first' });
      await postings.getByRole('row').filter({ hasText: 'QP_TOPUP' }).first().waitFor();

      // The range as the page sent it: the inputs' local times (this machine's zone, the browser's) as instants.
      const [from, to] = await Promise.all(
        ['#statement-from', '#statement-to'].map(async (id) => new Date(await page.locator(id).inputValue()).toISOString()),
      );
      const at = async (instant: string | undefined) => {
        const res = await t.call('GET', `/accounts/${WALLET}/balance?at=${encodeURIComponent(instant ?? '')}`);
        expect(res.statusCode, res.body).toBe(200);
        return BigInt(res.json().balance as string);
      };
      expect(await page.locator('#statement-opening').textContent()).toBe(shownMoney(await at(from)));
      expect(await page.locator('#statement-closing').textContent()).toBe(shownMoney(await at(to)));
      const json = await t.call(
        'GET',
        `/accounts/${WALLET}/statement?from=${encodeURIComponent(from ?? '')}&to=${encodeURIComponent(to ?? '')}`,
      );
      expect(json.statusCode, json.body).toBe(200);
      const entries = json.json().entries as unknown[];
      expect(entries.length).toBeGreaterThan(0);
      // A header row and one per entry.
      expect(await postings.getByRole('row').count()).toBe(entries.length + 1);

      const downloading = page.waitForEvent('download');
      await form.getByRole('button', { name: 'Download csv' }).click();
      const download = await downloading;
      expect(download.suggestedFilename()).toBe(`statement-${WALLET}.csv`);
      const csv = readFileSync((await download.path()) ?? '', 'utf8');
      const lines = csv.trimEnd().split('\r\n');
      expect(lines[0]).toBe('at,intentId,refundId,operationType,direction,amount,feeAmount,balanceAfter');
      expect(lines.length).toBe(entries.length + 1);
      expect(lines.some((line) => line.includes(',QP_TOPUP,CREDIT,'))).toBe(true);
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  }, 120_000);

  it('on a server started without ADMIN_TOKEN, the sign-in form says so and how to set it', async () => {
    // A second server, started as `npm start` alone starts one: no ADMIN_TOKEN.
    const tokenless = await startTestApp({ env: { ADMIN_TOKEN: '' } });
    const page = await browser.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    try {
      await tokenless.app.listen({ port: 0, host: '127.0.0.1' });
      await page.goto(`http://127.0.0.1:${(tokenless.app.server.address() as AddressInfo).port}/console`);
      // Said up front, before any token is typed.
      await page.locator('#no-admin-token').filter({ hasText: 'This server has no ADMIN_TOKEN' }).waitFor();
      await page.getByLabel('Admin token').fill('any-token-at-all');
      await page.getByRole('button', { name: 'Open console' }).click();
      const alert = page.getByRole('alert').filter({ hasText: 'UNAUTHORIZED' });
      await alert.waitFor();
      expect(await alert.textContent()).toMatch(
        /^UNAUTHORIZED: this server has no ADMIN_TOKEN: restart it with ADMIN_TOKEN set .*ADMIN_TOKEN=<token> npm start/,
      );
      expect(await page.evaluate("sessionStorage.getItem('payorch.adminToken')")).toBeNull();
    } finally {
      await page.close();
      await tokenless.close();
    }
  });

  it('lists a dead webhook with its last answer and redelivers it from the Dead webhooks section', async () => {
    const setWebhook = async (webhook: { url: string } | undefined) => {
      const key = (
        await t.app.inject({ method: 'GET', url: '/admin/service-keys/wallet-api', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      ).json();
      const { webhook: _, ...permissions } = key.permissions;
      const res = await t.app.inject({
        method: 'PATCH',
        url: '/admin/service-keys/wallet-api',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ permissions: webhook === undefined ? permissions : { ...permissions, webhook } }),
      });
      expect(res.statusCode, res.body).toBe(200);
    };
    // Port 1 refuses every connection; a 1 ms window makes the first failure final.
    await setWebhook({ url: 'http://127.0.0.1:1/hooks' });
    const webhooks = createWebhookWorker({
      db: t.db,
      secrets: () => t.secrets,
      log: captureLogger(),
      cursors: new CursorSeal(t.config.cursorSealSecret),
      settings: { ...WEBHOOK_DEFAULTS, retryBaseMs: 10, retryWindowMs: 1 },
    });
    const deadCursors = async () =>
      (
        await t.db.query<{ feed_cursor: string; body: string }>(
          'SELECT feed_cursor, body FROM webhook_deliveries WHERE dead_at IS NOT NULL',
        )
      ).rows;
    for (let run = 0; run < 50 && (await deadCursors()).length === 0; run++) await webhooks.runOnce();
    const [dead] = await deadCursors();
    if (dead === undefined) throw new Error('no webhook delivery died');

    const { page, problems } = await signedInPage();
    try {
      await page.getByRole('link', { name: 'Dead webhooks' }).click();
      // The console names a delivery by the sealed cursor its webhook carried (docs/rules.md R63).
      const { cursor } = JSON.parse(dead.body) as { cursor: string };
      const row = page.locator(`tr[data-cursor="${cursor}"]`);
      await row.filter({ hasText: 'network_error' }).waitFor();
      await row.getByRole('button', { name: 'Redeliver' }).click();
      await row.getByRole('status').filter({ hasText: 'Redelivery scheduled' }).waitFor();
      const { rows } = await t.db.query<{ dead: boolean; attempts: number }>(
        'SELECT dead_at IS NOT NULL AS dead, attempts FROM webhook_deliveries WHERE feed_cursor = $1',
        [dead.feed_cursor],
      );
      expect(rows).toEqual([{ dead: false, attempts: 0 }]);
      expect(problems).toEqual([]);
    } finally {
      await page.close();
      await setWebhook(undefined);
    }
  });

  it("shows a settled intent's refunds and refunded amount, and its whole id in the list", async () => {
    await createUser(t, USER + 1);
    const paid = await t.call('POST', '/intents', {
      user: USER,
      body: {
        idempotencyKey: randomUUID(),
        operationType: 'P2P_TRANSFER',
        amount: 3000,
        recipientUserId: USER + 1,
        metadata: { tags: ['fee_exempt'] },
      },
    });
    expect(paid.statusCode, paid.body).toBe(201);
    const id: string = paid.json().intentId;
    const refund = await t.call('POST', `/intents/${id}/refunds`, {
      user: 77,
      body: { idempotencyKey: randomUUID(), reason: 'customer asked', amount: 1250 },
    });
    expect(refund.statusCode, refund.body).toBe(201);

    const { page, problems } = await signedInPage();
    try {
      const row = page.locator(`tr[data-intent-id="${id}"]`);
      await row.waitFor();
      expect(await row.locator('code').textContent()).toBe(id);
      await row.getByRole('link', { name: id }).click();
      await page.locator('#refunded-amount').filter({ hasText: '12.50 THB' }).waitFor();
      const refunds = page.getByRole('table', { name: 'Refunds, oldest first' });
      await refunds.locator(`tr[data-refund-id="${refund.json().refundId}"]`).filter({ hasText: 'SETTLED' }).waitFor();
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('lists reconciliation runs and shows one run with its breaks', async () => {
    const created = await t.app.inject({
      method: 'POST',
      url: '/admin/reconciliation/runs',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { date: '20250103' },
    });
    expect(created.statusCode, created.body).toBe(201);
    const run = created.json();
    const { page, problems } = await signedInPage();
    try {
      await page.getByRole('link', { name: 'Reconciliation' }).click();
      const row = page.locator(`tr[data-run-id="${run.runId}"]`);
      await row.filter({ hasText: '20250103' }).filter({ hasText: run.status }).waitFor();
      await row.getByRole('link', { name: run.runId }).click();
      await page.getByRole('heading', { name: `Reconciliation run ${run.runId}` }).waitFor();
      await page.getByRole('table', { name: new RegExp(`^Breaks \\(${run.breakCount}\\)`) }).waitFor();
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('starts a run for a date and pages through its breaks with the API cursor', async () => {
    const date = '20250107';
    // 55 lines the provider made itself: 55 UNKNOWN_LINE breaks, more than the page of 50.
    const lineIds = Array.from({ length: 55 }, (_, n) => `PSPXL-E2E-${String(n + 1).padStart(2, '0')}`);
    for (const [n, lineId] of lineIds.entries()) {
      expect(t.pspxSimulator.simulator.statements.plant({ date, addLine: { type: 'FEE', amount: String(100 + n), lineId } }).ok).toBe(true);
    }
    const { page, problems, urls } = await signedInPage();
    try {
      await page.getByRole('link', { name: 'Reconciliation' }).click();
      const form = page.getByRole('form', { name: 'Run for date' });
      await form.getByLabel('Statement date (Bangkok)').fill('2025-01-07');
      await form.getByRole('button', { name: 'Run reconciliation' }).click();

      const breaks = page.getByRole('table', { name: /^Breaks \(55\)/ });
      const lineColumn = () => breaks.locator('tbody tr td:nth-child(3)').allTextContents();
      await page.getByRole('table', { name: 'Breaks (55), in the order found: 1–50' }).waitFor();
      const heading = await page.getByRole('heading', { name: /^Reconciliation run / }).textContent();
      const runId = heading?.replace('Reconciliation run ', '') ?? '';
      expect(page.url()).toBe(`${baseUrl}/console#/reconciliation/${runId}`);
      const firstPage = await lineColumn();
      expect(firstPage).toHaveLength(50);
      expect(await page.getByRole('button', { name: 'Previous breaks' }).count()).toBe(0);

      await page.getByRole('button', { name: 'Next breaks' }).click();
      await page.getByRole('table', { name: 'Breaks (55), in the order found: 51–55' }).waitFor();
      const secondPage = await lineColumn();
      expect(secondPage).toHaveLength(5);
      expect(await page.getByRole('button', { name: 'Next breaks' }).count()).toBe(0);
      // Every break once, in the order the run found them.
      expect([...firstPage, ...secondPage].sort()).toEqual(lineIds);
      const stored = await t.app.inject({
        method: 'GET',
        url: `/admin/reconciliation/runs/${runId}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(stored.json()).toMatchObject({ date, requestedBy: 'admin-token', breakCount: 55 });
      expect([...firstPage, ...secondPage]).toEqual(stored.json().breaks.map((found: { lineId: string }) => found.lineId));
      // The second page was asked for with the first page's cursor, not by reading everything.
      const nextAfter = (
        await t.app.inject({
          method: 'GET',
          url: `/admin/reconciliation/runs/${runId}?limit=50`,
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        })
      ).json().nextBreaksAfter;
      expect(urls).toContain(`${baseUrl}/admin/reconciliation/runs/${runId}?limit=50&after=${nextAfter}`);

      await page.getByRole('button', { name: 'Previous breaks' }).click();
      await page.getByRole('table', { name: 'Breaks (55), in the order found: 1–50' }).waitFor();
      expect(await lineColumn()).toEqual(firstPage);

      // A date in the future is refused, and the page says why.
      await page.getByRole('link', { name: 'All runs' }).click();
      await form.getByLabel('Statement date (Bangkok)').fill('2099-01-01');
      await form.getByRole('button', { name: 'Run reconciliation' }).click();
      await page.getByRole('alert').filter({ hasText: 'VALIDATION_ERROR' }).waitFor();
      // The refusal itself is the one failed request (Chromium also logs it as a console error).
      expect(problems.filter((problem) => !problem.includes('422'))).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('a wrong token is refused on the sign-in form and nothing is kept', async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    try {
      await page.goto(`${baseUrl}/console`);
      await page.getByLabel('Admin token').fill('not-the-token');
      await page.getByRole('button', { name: 'Open console' }).click();
      await page.getByRole('alert').filter({ hasText: 'UNAUTHORIZED' }).waitFor();
      expect(await page.evaluate("sessionStorage.getItem('payorch.adminToken')")).toBeNull();
    } finally {
      await page.close();
    }
  });
});
