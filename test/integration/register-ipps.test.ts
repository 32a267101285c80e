import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findAccount } from '../../src/domain/accounts/accounts.js';
import { startTestApp, type TestApp } from '../support/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());

const customer = {
  externalUserId: 'ext-501',
  customerEnglishName: 'Somchai Jaidee',
  senderTaxId: '1101700203451',
  senderAccountName: 'Somchai Jaidee',
  senderMobileNumber: '+66812345678',
  documentExpiry: '2031-12-31',
  dateOfBirth: '1988-02-29',
  phoneNumber: '0812345678',
  nationality: 'TH',
  address: '99 Sukhumvit Road, Khlong Toei, Bangkok 10110',
};

const register = (user: number | string | undefined, body: unknown = customer, service?: string) =>
  t.call('POST', '/accounts/register-ipps', {
    body,
    ...(user === undefined ? {} : { user }),
    ...(service === undefined ? {} : { service }),
  });

async function openWallet(userId: number) {
  const res = await t.call('POST', '/accounts', { user: userId, body: { userId, currency: 'THB' } });
  expect(res.statusCode).toBe(201);
}

describe('POST /accounts/register-ipps', () => {
  it('registers once with the provider (201), then answers 200 from the stored id without a provider call', async () => {
    await openWallet(501);
    const registrations = t.pspxSimulator.simulator.stats.registrations;
    const first = await register(501);
    expect(first.statusCode).toBe(201);
    const { walletId } = first.json() as { walletId: string };
    expect(first.json()).toEqual({ walletId: expect.stringMatching(/^PSPXW-/), alreadyRegistered: false });
    expect((await findAccount(t.db, 'user.501.THB'))?.pspxWalletId).toBe(walletId);
    expect(t.pspxSimulator.simulator.stats.registrations).toBe(registrations + 1);

    const again = await register(501, { ...customer, senderMobileNumber: undefined });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual({ walletId, alreadyRegistered: true });
    expect(t.pspxSimulator.simulator.stats.registrations).toBe(registrations + 1);
  });

  it('accepts a body without the optional senderMobileNumber', async () => {
    await openWallet(502);
    const { senderMobileNumber: _omitted, ...withoutMobile } = customer;
    expect((await register(502, withoutMobile)).statusCode).toBe(201);
  });

  it('two concurrent registrations for one user store one wallet id and both answers name it', async () => {
    await openWallet(503);
    const before = t.pspxSimulator.simulator.stats;
    // A slow provider keeps both requests past the "already registered?" read, so both reach the conditional update.
    t.pspxSimulator.simulator.setDelayMs(100);
    const answers = await Promise.all([register(503), register(503)]).finally(() => t.pspxSimulator.simulator.setDelayMs(0));
    expect(t.pspxSimulator.simulator.stats.registrations - before.registrations).toBe(2);
    expect(t.pspxSimulator.simulator.stats.walletsCreated - before.walletsCreated).toBe(1);
    // Exactly one conditional update wins (201); the other answer reports the stored wallet (200).
    expect(answers.map((res) => res.statusCode).sort()).toEqual([200, 201]);
    const ids = new Set(answers.map((res) => (res.json() as { walletId: string }).walletId));
    expect(ids.size).toBe(1);
    expect((await findAccount(t.db, 'user.503.THB'))?.pspxWalletId).toBe([...ids][0]);
  });

  it.each([
    ['missing', undefined],
    ['not a number', 'abc'],
    ['negative', '-1'],
    ['zero', 0],
    ['a decimal', '1.5'],
  ])('answers 400 BAD_REQUEST for an X-User-Id that is %s', async (_name, user) => {
    const res = await register(user);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('BAD_REQUEST');
  });

  it.each(['nfc-terminal', 'mobile-gateway', 'admin-tool'])(
    'answers 403 FORBIDDEN to %s, whose key has neither PSPX operation type',
    async (service) => {
      await openWallet(600 + ['nfc-terminal', 'mobile-gateway', 'admin-tool'].indexOf(service));
      const res = await register(600 + ['nfc-terminal', 'mobile-gateway', 'admin-tool'].indexOf(service), customer, service);
      expect(res.statusCode).toBe(403);
      expect(res.json().error).toBe('FORBIDDEN');
    },
  );

  it('answers 404 NOT_FOUND when the user has no THB wallet, without calling the provider', async () => {
    const registrations = t.pspxSimulator.simulator.stats.registrations;
    const res = await register(404_404);
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toBe('NOT_FOUND');
    expect(t.pspxSimulator.simulator.stats.registrations).toBe(registrations);
  });

  it.each([
    ['externalUserId missing', { externalUserId: undefined }],
    ['customerEnglishName empty', { customerEnglishName: '' }],
    ['customerEnglishName blank', { customerEnglishName: '   ' }],
    ['senderTaxId of 12 digits', { senderTaxId: '110170020345' }],
    ['senderTaxId with a letter', { senderTaxId: '110170020345X' }],
    ['senderTaxId as a number', { senderTaxId: 1101700203451 }],
    ['senderAccountName missing', { senderAccountName: undefined }],
    ['senderMobileNumber with letters', { senderMobileNumber: 'call me' }],
    ['documentExpiry not a calendar date', { documentExpiry: '2031-02-30' }],
    ['documentExpiry in another format', { documentExpiry: '31/12/2031' }],
    ['dateOfBirth on 29 February of a common year', { dateOfBirth: '1989-02-29' }],
    ['dateOfBirth with a time', { dateOfBirth: '1988-02-28T00:00:00Z' }],
    ['phoneNumber missing', { phoneNumber: undefined }],
    ['nationality lower case', { nationality: 'th' }],
    ['nationality of three letters', { nationality: 'THA' }],
    ['address missing', { address: undefined }],
    ['an unknown field', { walletId: 'mine' }],
  ])('answers 422 VALIDATION_ERROR for %s', async (_name, change) => {
    const body = Object.fromEntries(Object.entries({ ...customer, ...change }).filter(([, value]) => value !== undefined));
    const res = await register(502, body);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('VALIDATION_ERROR');
  });

  it('answers 503 PSPX_UNAVAILABLE when the provider does not answer, stores nothing, and succeeds on a retry', async () => {
    await openWallet(504);
    // Three 503s use up the client's three attempts (and stay under its breaker threshold of five).
    t.pspxSimulator.simulator.failNext(3);
    const down = await register(504);
    expect(down.statusCode).toBe(503);
    expect(down.json().error).toBe('PSPX_UNAVAILABLE');
    expect((await findAccount(t.db, 'user.504.THB'))?.pspxWalletId).toBeNull();
    expect((await register(504)).statusCode).toBe(201);
  });
});
