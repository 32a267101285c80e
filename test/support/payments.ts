import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import type { TestApp } from './app.js';

/** Small helpers for tests that move money through the HTTP interface. */

export async function createUser(t: TestApp, userId: number): Promise<void> {
  const res = await t.call('POST', '/accounts', { user: userId, body: { userId, currency: 'THB' } });
  expect([200, 201]).toContain(res.statusCode);
}

export async function createMerchant(t: TestApp, userId: number): Promise<void> {
  const res = await t.call('POST', '/accounts', {
    service: 'admin-tool',
    user: userId,
    body: { userId, currency: 'THB', entityType: 'merchant' },
  });
  expect([200, 201]).toContain(res.statusCode);
}

/** Funds a user wallet from the PSPX nostro with a QP_TOPUP (the nostro may go negative). */
export async function topUp(t: TestApp, userId: number, amount: number): Promise<void> {
  const res = await t.call('POST', '/intents', {
    user: userId,
    body: { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount },
  });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().status).toBe('SETTLED');
}

export async function balance(t: TestApp, accountName: string): Promise<bigint> {
  const res = await t.call('GET', `/accounts/${accountName}/balance`);
  expect(res.statusCode, res.body).toBe(200);
  return BigInt(res.json().balance as string);
}

export async function balances(t: TestApp, names: readonly string[]): Promise<Record<string, string>> {
  const entries = await Promise.all(names.map(async (name) => [name, (await balance(t, name)).toString()] as const));
  return Object.fromEntries(entries);
}

export const intentBody = (overrides: Record<string, unknown>) => ({ idempotencyKey: randomUUID(), currency: 'THB', ...overrides });
