import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import type { TestApp } from './app.js';

/** docs/rules.md R58's statement as the json format answers it. */
export interface StatementEntry {
  at: string;
  intentId: string | null;
  refundId: string | null;
  operationType: string | null;
  direction: 'DEBIT' | 'CREDIT';
  amount: string;
  feeAmount: string;
  balanceAfter: string;
}
export interface Statement {
  accountName: string;
  currency: string;
  from: string;
  to: string;
  openingBalance: string;
  closingBalance: string;
  entries: StatementEntry[];
}

/** An instant between two postings: after the one it follows, before the next, as the client sends it. */
export async function markBetween(marks: string[]): Promise<string> {
  await sleep(10);
  const at = new Date().toISOString();
  await sleep(10);
  marks.push(at);
  return at;
}

/** Every reserved character escaped, the quote too (encodeURIComponent leaves it). */
export const q = (value: string) => encodeURIComponent(value).replace(/'/g, '%27');
export const statementPath = (name: string, from: string, to: string, format?: string) =>
  `/accounts/${name}/statement?from=${q(from)}&to=${q(to)}${format === undefined ? '' : `&format=${format}`}`;

export async function jsonStatement(t: TestApp, name: string, from: string, to: string): Promise<Statement> {
  const res = await t.call('GET', statementPath(name, from, to));
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Statement;
}
