/**
 * The client as a user of the published package gets it: `npm pack` of packages/client, the
 * tarball installed alone in an empty project outside the repository, a TypeScript program
 * compiled against the installed declarations and run against a real payorch listener. It signs
 * with an HTTP Message Signature, creates an invoice (with live status messages) and watches it,
 * over the stream, from CREATED to its final status while it is paid.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';

const run = promisify(execFile);
const repository = fileURLToPath(new URL('../..', import.meta.url));
const tsc = join(repository, 'node_modules', 'typescript', 'bin', 'tsc');
/** User ids of this file only: the payer lock is database-wide on a shared PostgreSQL server. */
const [PAYER, MERCHANT] = [7301, 7302] as const;

let t: TestApp;
let project: string;
let tarball: string;

beforeAll(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  project = await mkdtemp(join(tmpdir(), 'payorch-client-consumer-'));
  const packed = await run('npm', ['pack', '--workspace=@payorch/client', '--pack-destination', project, '--json'], {
    cwd: repository,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
  tarball = join(project, filename);
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  // No registry: a package without dependencies installs from its tarball alone.
  await run('npm', ['install', tarball, '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: project });
}, 120_000);
afterAll(async () => {
  await t?.close();
  if (project !== undefined) await rm(project, { recursive: true, force: true });
});

const installed = () => join(project, 'node_modules', '@payorch', 'client');

describe('the @payorch/client package installed alone', () => {
  it('brings nothing else: node_modules holds the client only', async () => {
    expect((await readdir(join(project, 'node_modules'))).filter((name) => name !== '.package-lock.json')).toEqual(['@payorch']);
    expect(await readdir(join(project, 'node_modules', '@payorch'))).toEqual(['client']);
    const manifest = JSON.parse(await readFile(join(installed(), 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(manifest).toMatchObject({ name: '@payorch/client', license: 'Apache-2.0', repository: { directory: 'packages/client' } });
    expect(manifest.dependencies).toBeUndefined();
    expect(await readdir(installed())).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'dist', 'src']));
  });

  it('ships source maps whose sources are files in the package', async () => {
    const maps = (await readdir(join(installed(), 'dist'))).filter((name) => name.endsWith('.map'));
    expect(maps.length).toBeGreaterThan(10);
    for (const map of maps) {
      const { sources } = JSON.parse(await readFile(join(installed(), 'dist', map), 'utf8')) as { sources: string[] };
      for (const source of sources) expect(existsSync(resolve(installed(), 'dist', dirname(map), source)), `${map}: ${source}`).toBe(true);
    }
  });

  it('a TypeScript program compiles against its types, signs with RFC 9421, creates an invoice and watches it to SETTLED', async () => {
    const port = (t.app.server.address() as AddressInfo).port;
    const secretOf = (serviceId: string) => t.secrets.get(serviceId)?.[0] ?? '';
    await mkdir(join(project, 'src'), { recursive: true });
    await writeFile(
      join(project, 'src', 'settings.ts'),
      `export const settings = ${JSON.stringify({
        baseUrl: `http://127.0.0.1:${port}`,
        wallet: secretOf('wallet-api'),
        adminTool: secretOf('admin-tool'),
        payer: PAYER,
        merchant: MERCHANT,
      })};\n`,
    );
    await writeFile(join(project, 'src', 'consumer.ts'), CONSUMER);
    await writeFile(join(project, 'src', 'misuse.ts'), MISUSE);
    // The package README's example, as written, compiles too; `process` is all it takes from Node.
    const readme = await readFile(join(installed(), 'README.md'), 'utf8');
    const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example).toContain('createPayorchClient');
    await writeFile(
      join(project, 'src', 'readme-example.ts'),
      `declare const process: { env: Record<string, string | undefined> };\n${example}`,
    );
    await writeFile(join(project, 'tsconfig.json'), JSON.stringify(CONSUMER_TSCONFIG));
    // The declarations are checked too (skipLibCheck off), under the strictest settings a user may have.
    await run(process.execPath, [tsc, '-p', project]);

    const { stdout } = await run(process.execPath, [join(project, 'out', 'consumer.js')], { cwd: project });
    const report = JSON.parse(stdout) as ConsumerReport;
    expect(report.created).toMatchObject({ status: 'CREATED', channel: 'MERCHANT_INVOICE' });
    // Every transition the confirm makes, each once, in order, as the service publishes them.
    expect(report.watched).toEqual(['CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLED']);
    expect(report.final).toMatchObject({ status: 'SETTLED', version: 1 });
    expect(report.missing).toEqual({ status: 404, code: 'NOT_FOUND', isPayorchError: true });
    // Every signed request went out with a message signature over the user id, never the older header.
    expect(report.signedHeaders.length).toBeGreaterThan(3);
    for (const headers of report.signedHeaders) {
      expect(headers['x-signature']).toBeUndefined();
      expect(headers['signature-input']).toMatch(/^sig1=\("@method" "@path" "@query"/);
      expect(headers.signature).toMatch(/^sig1=:[A-Za-z0-9+/]+=*:$/);
    }
    const withUser = report.signedHeaders.filter((headers) => headers['x-user-id'] !== undefined);
    expect(withUser.length).toBeGreaterThan(0);
    for (const headers of withUser) expect(headers['signature-input']).toContain('"x-user-id"');
    await expectLedgerInvariants(t.db);
  });
});

interface ConsumerReport {
  readonly created: unknown;
  readonly watched: string[];
  readonly final: unknown;
  readonly missing: unknown;
  readonly signedHeaders: Array<Record<string, string>>;
}

/** No @types/node in the consumer project: the client must type-check with the DOM's globals alone. */
const CONSUMER_TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    lib: ['ES2022', 'DOM', 'DOM.Iterable'],
    types: [],
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: false,
    rootDir: 'src',
    outDir: 'out',
  },
  include: ['src'],
};

const CONSUMER = `import { createPayorchClient, FINAL_STATUSES, PayorchError, type IntentStatus } from '@payorch/client';
import { settings } from './settings.js';

const signedHeaders: Array<Record<string, string>> = [];
const recordingFetch: typeof fetch = (input, init) => {
  const headers = Object.fromEntries(new Headers(init?.headers).entries());
  if (headers['x-service-id'] !== undefined) signedHeaders.push(headers);
  return fetch(input, init);
};
const wallet = createPayorchClient({ baseUrl: settings.baseUrl, serviceId: 'wallet-api', secret: settings.wallet, fetch: recordingFetch });
const adminTool = createPayorchClient({ baseUrl: settings.baseUrl, serviceId: 'admin-tool', secret: settings.adminTool, fetch: recordingFetch });

const merchant = await adminTool.accounts.create({ userId: settings.merchant, entityType: 'merchant' });
if (!('primary' in merchant)) throw new Error('a merchant has a primary account');
const payer = await wallet.accounts.create({ userId: settings.payer });
if (!('ledgerAccountId' in payer)) throw new Error('a user has one account');
await wallet.intents.create({ operationType: 'QP_TOPUP', amount: 5_000 }, { userId: settings.payer });

const created = await wallet.intents.create(
  { operationType: 'INVOICE_PAYMENT', amount: 1_200, toLedgerAccountId: merchant.primary.ledgerAccountId, live: true },
  { userId: settings.merchant },
);
const watched: IntentStatus[] = [];
for await (const message of wallet.intents.stream(created.intentId, { signal: AbortSignal.timeout(10_000) })) {
  watched.push(message.status);
  if (message.status === 'CREATED') {
    await wallet.intents.confirm(created.intentId, { payerLedgerAccountId: payer.ledgerAccountId, payerUserId: settings.payer });
  }
  if (FINAL_STATUSES.includes(message.status)) break;
}
const final = await wallet.intents.get(created.intentId);

let missing: unknown = null;
try {
  await wallet.intents.get('00000000-0000-4000-8000-000000000000');
} catch (error) {
  if (!(error instanceof PayorchError)) throw error;
  missing = { status: error.status, code: error.code, isPayorchError: true };
}
console.log(JSON.stringify({ created, watched, final, missing, signedHeaders }));
`;

/** Each line must be refused by the compiler: with untyped (any) declarations, the directives themselves fail. */
const MISUSE = `import { createPayorchClient } from '@payorch/client';

const client = createPayorchClient({ baseUrl: 'http://127.0.0.1:1', serviceId: 'x', secret: 'y' });
export async function misuse(): Promise<void> {
  // @ts-expect-error: not an operation type
  await client.intents.create({ operationType: 'TOPUP', amount: 1 }, { userId: 1 });
  // @ts-expect-error: an amount is a number of satang
  await client.intents.create({ operationType: 'QP_TOPUP', amount: '1' }, { userId: 1 });
  // @ts-expect-error: NFC_CHARGE has no quote
  await client.intents.quote({ operationType: 'NFC_CHARGE', amount: 1 });
  // @ts-expect-error: a signing client needs its secret
  createPayorchClient({ baseUrl: 'http://127.0.0.1:1', serviceId: 'x' });
}
`;
