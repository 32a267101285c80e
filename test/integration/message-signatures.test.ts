import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Component,
  contentDigest,
  messageSignature,
  messageSignedHeaders,
  serializeSignatureParams,
  signatureBase,
  type SignatureParams,
} from '../../src/domain/auth/message-signing.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { createSharedState, type SharedState } from '../../src/adapters/shared-state.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balance, createUser, topUp } from '../support/payments.js';

/**
 * HTTP Message Signatures (RFC 9421) beside the older X-Signature (docs/rules.md R1): the signature binds the
 * acting user, so a captured request cannot be re-sent for someone else; nonces and signed admin
 * writes cannot be replayed (docs/SECURITY.md §2 and §3).
 */

const PAYER = 7401;
const VICTIM = 7402;
const PAYEE = 7403;
const BALANCE_PATH = '/accounts/system.revenue.THB/balance';

let t: TestApp;
const secretOf = (service: string) => t.secrets.get(service)?.[0] ?? '';
const nowS = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  t = await startTestApp();
  for (const user of [PAYER, VICTIM, PAYEE]) await createUser(t, user);
  await topUp(t, PAYER, 100_000);
  await topUp(t, VICTIM, 100_000);
});
afterAll(async () => t?.close());

const p2p = (amount = 1_000) =>
  JSON.stringify({ idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount, recipientUserId: PAYEE });

function send(method: 'GET' | 'POST', url: string, headers: Record<string, string>, body = '') {
  return t.app.inject({
    method,
    url,
    headers: { ...headers, ...(body === '' ? {} : { 'content-type': 'application/json' }) },
    ...(body === '' ? {} : { payload: body }),
  });
}

/** A signature over exactly the given components and parameters: for the requests the client never makes. */
function crafted(
  secret: string,
  components: readonly Component[],
  params: { keyid: string; alg?: string; nonce?: string | null },
  label = 'sig1',
) {
  const { nonce = randomUUID(), ...rest } = params;
  const signatureParams: SignatureParams = { created: nowS(), ...rest, ...(nonce === null ? {} : { nonce }) };
  const raw = serializeSignatureParams(
    components.map(([name]) => name),
    signatureParams,
  );
  return { 'signature-input': `${label}=${raw}`, signature: `${label}=:${messageSignature(secret, signatureBase(components, raw))}:` };
}

const getComponents = (path: string): Component[] => [
  ['@method', 'GET'],
  ['@path', path],
  ['@query', '?'],
];

async function expect401(response: Awaited<ReturnType<typeof send>>, message: string | RegExp) {
  expect(response.statusCode, response.body).toBe(401);
  expect(response.json()).toEqual({
    error: 'UNAUTHORIZED',
    message: typeof message === 'string' ? message : expect.stringMatching(message),
  });
}

describe('a captured request re-sent with another X-User-Id', () => {
  it('is refused when message-signed, and nothing moves', async () => {
    const body = p2p();
    const captured = messageSignedHeaders('wallet-api', secretOf('wallet-api'), 'POST', '/intents', body, { userId: PAYER });
    const before = await balance(t, `user.${VICTIM}.THB`);
    await expect401(await send('POST', '/intents', { ...captured, 'x-user-id': String(VICTIM) }, body), 'invalid signature');
    expect(await balance(t, `user.${VICTIM}.THB`)).toBe(before);
    const genuine = await send('POST', '/intents', captured, body);
    expect(genuine.statusCode, genuine.body).toBe(201);
    await expectLedgerInvariants(t.db);
  });

  it('charges the other user when legacy-signed, as X-Signature allows: hence requireMessageSignatures', async () => {
    const body = p2p(700);
    const captured = signedHeaders('wallet-api', secretOf('wallet-api'), 'POST', '/intents', body, { userId: PAYER });
    const before = await balance(t, `user.${VICTIM}.THB`);
    const res = await send('POST', '/intents', { ...captured, 'x-user-id': String(VICTIM) }, body);
    expect(res.statusCode, res.body).toBe(201);
    expect(await balance(t, `user.${VICTIM}.THB`)).toBe(before - 700n);
    await expectLedgerInvariants(t.db);
  });

  it('a key with requireMessageSignatures (set through the admin API) refuses X-Signature and accepts a message signature', async () => {
    const key = await t.call('GET', '/admin/service-keys/wallet-api', { service: 'admin-tool' });
    expect(key.statusCode, key.body).toBe(200);
    const permissions = key.json().permissions as Record<string, unknown>;
    const setRequirement = async (requireMessageSignatures: boolean) => {
      const res = await t.call('PATCH', '/admin/service-keys/wallet-api', {
        service: 'admin-tool',
        scheme: 'message',
        body: { permissions: { ...permissions, requireMessageSignatures } },
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().permissions.requireMessageSignatures).toBe(requireMessageSignatures);
    };
    const before = await balance(t, `user.${VICTIM}.THB`);
    await setRequirement(true);
    try {
      await expect401(await t.call('GET', BALANCE_PATH), /HTTP message signature/);
      const body = p2p(300);
      const legacy = signedHeaders('wallet-api', secretOf('wallet-api'), 'POST', '/intents', body, { userId: VICTIM });
      await expect401(await send('POST', '/intents', legacy, body), /HTTP message signature/);
      const after = await t.call('GET', `/accounts/user.${VICTIM}.THB/balance`, { scheme: 'message' });
      expect(after.statusCode).toBe(200);
      expect(after.json().balance).toBe(before.toString());
    } finally {
      await setRequirement(false);
    }
    expect((await t.call('GET', BALANCE_PATH)).statusCode).toBe(200);
  });
});

describe('a key created with requireMessageSignatures', () => {
  it('is stored with it, and its service can sign only with a message signature', async () => {
    const serviceId = `strict-${randomUUID().slice(0, 8)}`;
    const created = await t.call('POST', '/admin/service-keys', {
      service: 'admin-tool',
      body: { serviceId, permissions: { allowedOperationTypes: [], requireMessageSignatures: true } },
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().permissions).toEqual({ allowedOperationTypes: [], requireMessageSignatures: true });
    const previous = t.secrets;
    t.secrets = new Map([...previous, [serviceId, ['strict-secret']]]);
    try {
      await expect401(await t.call('GET', BALANCE_PATH, { service: serviceId }), /HTTP message signature/);
      expect((await t.call('GET', BALANCE_PATH, { service: serviceId, scheme: 'message' })).statusCode).toBe(200);
    } finally {
      t.secrets = previous;
    }
  });
});

describe('what a message signature must satisfy', () => {
  it('refuses a body whose Content-Digest does not match, and a body without one', async () => {
    const body = p2p();
    const headers = messageSignedHeaders('wallet-api', secretOf('wallet-api'), 'POST', '/intents', body, { userId: PAYER });
    await expect401(await send('POST', '/intents', headers, body.replace('1000', '9000')), 'content digest mismatch');
    const { 'content-digest': _digest, ...withoutDigest } = headers;
    await expect401(await send('POST', '/intents', withoutDigest, body), 'missing header Content-Digest');
    const sha512Only = { ...headers, 'content-digest': 'sha-512=:AAAA:' };
    await expect401(await send('POST', '/intents', sha512Only, body), 'Content-Digest must carry sha-256');
    await expect401(await send('POST', '/intents', { ...headers, 'content-digest': 'sha-256=abc' }, body), 'malformed Content-Digest');
  });

  it.each(['@method', '@path', '@query'])('refuses a signature that does not cover %s', async (left) => {
    const components = getComponents(BALANCE_PATH).filter(([name]) => name !== left);
    const headers = crafted(secretOf('wallet-api'), components, { keyid: 'wallet-api' });
    await expect401(await send('GET', BALANCE_PATH, headers), `missing covered component ${left}`);
  });

  it('refuses an X-User-Id the signature does not cover, and a body whose digest it does not cover', async () => {
    const headers = crafted(secretOf('wallet-api'), getComponents(BALANCE_PATH), { keyid: 'wallet-api' });
    await expect401(await send('GET', BALANCE_PATH, { ...headers, 'x-user-id': String(PAYER) }), 'missing covered component x-user-id');
    const body = p2p();
    const post: Component[] = [
      ['@method', 'POST'],
      ['@path', '/intents'],
      ['@query', '?'],
      ['x-user-id', String(PAYER)],
    ];
    const signed = {
      ...crafted(secretOf('wallet-api'), post, { keyid: 'wallet-api' }),
      'x-user-id': String(PAYER),
      'content-digest': contentDigest(body),
    };
    await expect401(await send('POST', '/intents', signed, body), 'missing covered component content-digest');
  });

  it('refuses created 61 s in the past, and accepts 55 s in the past', async () => {
    await expect401(await t.call('GET', BALANCE_PATH, { scheme: 'message', nowS: nowS() - 61 }), 'timestamp outside window');
    expect((await t.call('GET', BALANCE_PATH, { scheme: 'message', nowS: nowS() - 55 })).statusCode).toBe(200);
  });

  it('refuses created more than 5 s in the future, and accepts 3 s ahead (docs/rules.md R61)', async () => {
    for (const aheadS of [7, 55, 61]) {
      await expect401(await t.call('GET', BALANCE_PATH, { scheme: 'message', nowS: nowS() + aheadS }), 'timestamp outside window');
    }
    expect((await t.call('GET', BALANCE_PATH, { scheme: 'message', nowS: nowS() + 3 })).statusCode).toBe(200);
  });

  it('refuses an alg other than hmac-sha256, and accepts none', async () => {
    const components = getComponents(BALANCE_PATH);
    await expect401(
      await send('GET', BALANCE_PATH, crafted(secretOf('wallet-api'), components, { keyid: 'wallet-api', alg: 'hmac-sha512' })),
      'unsupported alg hmac-sha512',
    );
    expect((await send('GET', BALANCE_PATH, crafted(secretOf('wallet-api'), components, { keyid: 'wallet-api' }))).statusCode).toBe(200);
  });

  it('refuses a keyid other than X-Service-Id; without X-Service-Id the keyid names the service', async () => {
    const headers = crafted(secretOf('wallet-api'), getComponents(BALANCE_PATH), { keyid: 'wallet-api' });
    await expect401(await send('GET', BALANCE_PATH, { ...headers, 'x-service-id': 'nfc-terminal' }), 'keyid does not match X-Service-Id');
    expect((await send('GET', BALANCE_PATH, headers)).statusCode).toBe(200);
    const unknown = crafted('whatever', getComponents(BALANCE_PATH), { keyid: 'nobody' });
    await expect401(await send('GET', BALANCE_PATH, unknown), 'unknown service');
  });

  it('refuses a signature made with another secret, and verifies with every secret of a rotated list', async () => {
    const previous = t.secrets;
    t.secrets = new Map([...previous, ['wallet-api', ['new-wallet-secret', 'old-wallet-secret']]]);
    try {
      for (const secret of ['new-wallet-secret', 'old-wallet-secret']) {
        expect((await send('GET', BALANCE_PATH, messageSignedHeaders('wallet-api', secret, 'GET', BALANCE_PATH, ''))).statusCode).toBe(200);
      }
      await expect401(
        await send('GET', BALANCE_PATH, messageSignedHeaders('wallet-api', 'retired-secret', 'GET', BALANCE_PATH, '')),
        'invalid signature',
      );
    } finally {
      t.secrets = previous;
    }
  });

  it('covers the raw query', async () => {
    const path = `/accounts/user.${PAYER}.THB/transactions?limit=5`;
    const headers = messageSignedHeaders('wallet-api', secretOf('wallet-api'), 'GET', path, '');
    expect((await send('GET', path, headers)).statusCode).toBe(200);
    await expect401(await send('GET', path.replace('limit=5', 'limit=50'), headers), 'invalid signature');
  });

  it.each([
    [
      'two labels',
      (h: Record<string, string>) => ({ ...h, 'signature-input': `${h['signature-input']}, sig2=("@method");created=1;keyid="x"` }),
      'Signature-Input must hold exactly one signature',
    ],
    [
      'a repeated label',
      (h: Record<string, string>) => ({ ...h, 'signature-input': `${h['signature-input']}, ${h['signature-input']}` }),
      'malformed Signature-Input',
    ],
    [
      'an unparsable Signature-Input',
      (h: Record<string, string>) => ({ ...h, 'signature-input': 'sig1=("@method"' }),
      'malformed Signature-Input',
    ],
    [
      'another label in Signature',
      (h: Record<string, string>) => ({ ...h, signature: (h.signature ?? '').replace('sig1=', 'sig2=') }),
      /^Signature must hold exactly/,
    ],
    ['a Signature that is not a byte sequence', (h: Record<string, string>) => ({ ...h, signature: 'sig1="abc"' }), 'malformed Signature'],
    ['no Signature', ({ signature: _s, ...h }: Record<string, string>) => h, 'missing header Signature'],
    ['a truncated signature', (h: Record<string, string>) => ({ ...h, signature: 'sig1=:AAAA:' }), 'invalid signature'],
    [
      'keyid as a token',
      (h: Record<string, string>) => ({
        ...h,
        'signature-input': (h['signature-input'] ?? '').replace('keyid="wallet-api"', 'keyid=wallet-api'),
      }),
      'signature parameter keyid must be a string',
    ],
    [
      'an unknown parameter',
      (h: Record<string, string>) => ({ ...h, 'signature-input': `${h['signature-input']};foo=1` }),
      'unsupported signature parameter foo',
    ],
    [
      'a parameter on a component',
      (h: Record<string, string>) => ({ ...h, 'signature-input': (h['signature-input'] ?? '').replace('"@path"', '"@path";req') }),
      'unsupported parameters on covered component @path',
    ],
    [
      'a derived component we do not know',
      (h: Record<string, string>) => ({
        ...h,
        'signature-input': (h['signature-input'] ?? '').replace('"@path"', '"@path" "@target-uri"'),
      }),
      'unsupported covered component @target-uri',
    ],
  ])('refuses %s', async (_name, mangle, message) => {
    const headers = messageSignedHeaders('wallet-api', secretOf('wallet-api'), 'GET', BALANCE_PATH, '');
    await expect401(await send('GET', BALANCE_PATH, mangle(headers)), message);
  });

  it('takes an admin route signed this way instead of the bearer token', async () => {
    const headers = messageSignedHeaders('wallet-api', secretOf('wallet-api'), 'GET', '/admin/fee-rules', '');
    const res = await send('GET', '/admin/fee-rules', { ...headers, authorization: 'Bearer test-admin-token' });
    expect(res.statusCode).toBe(403);
  });
});

describe('nonces', () => {
  it('refuses a nonce the same service used within the window, whatever else changed', async () => {
    const nonce = randomUUID();
    const first = crafted(secretOf('wallet-api'), getComponents(BALANCE_PATH), { keyid: 'wallet-api', nonce });
    expect((await send('GET', BALANCE_PATH, first)).statusCode).toBe(200);
    await expect401(await send('GET', BALANCE_PATH, first), 'replayed nonce');
    const other = '/accounts/system.equity.THB/balance';
    await expect401(
      await send('GET', other, crafted(secretOf('wallet-api'), getComponents(other), { keyid: 'wallet-api', nonce })),
      'replayed nonce',
    );
  });

  it('accepts the same nonce from another service', async () => {
    const nonce = randomUUID();
    expect(
      (await send('GET', BALANCE_PATH, crafted(secretOf('wallet-api'), getComponents(BALANCE_PATH), { keyid: 'wallet-api', nonce })))
        .statusCode,
    ).toBe(200);
    expect(
      (
        await send(
          'GET',
          BALANCE_PATH,
          crafted(secretOf('mobile-gateway'), getComponents(BALANCE_PATH), { keyid: 'mobile-gateway', nonce }),
        )
      ).statusCode,
    ).toBe(200);
  });

  it('a forged request does not burn the nonce of a genuine one', async () => {
    const nonce = randomUUID();
    await expect401(
      await send('GET', BALANCE_PATH, crafted('not-the-secret', getComponents(BALANCE_PATH), { keyid: 'wallet-api', nonce })),
      'invalid signature',
    );
    expect(
      (await send('GET', BALANCE_PATH, crafted(secretOf('wallet-api'), getComponents(BALANCE_PATH), { keyid: 'wallet-api', nonce })))
        .statusCode,
    ).toBe(200);
  });
});

const feeRule = (name: string) =>
  JSON.stringify({
    name,
    operationType: 'MINIAPP_CREDIT',
    expression: "[{account: 'system.revenue.THB', amount: amount * 0.01}]",
    active: false,
  });

async function rulesNamed(app: TestApp, name: string): Promise<number> {
  const { rows } = await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM fee_rules WHERE name = $1', [name]);
  return rows[0]?.n ?? -1;
}

describe('replayed admin writes', () => {
  it.each(['x-signature', 'message without nonce', 'message with nonce'])(
    'a signed POST /admin/fee-rules sent twice (%s) creates one rule; the second is 401 replayed request',
    async (scheme) => {
      const name = `replay-${randomUUID()}`;
      const body = feeRule(name);
      const headers =
        scheme === 'x-signature'
          ? signedHeaders('admin-tool', secretOf('admin-tool'), 'POST', '/admin/fee-rules', body)
          : crafted(
              secretOf('admin-tool'),
              [
                ['@method', 'POST'],
                ['@path', '/admin/fee-rules'],
                ['@query', '?'],
                ['content-digest', contentDigest(body)],
              ],
              { keyid: 'admin-tool', ...(scheme === 'message with nonce' ? {} : { nonce: null }) },
            );
      const withDigest = scheme === 'x-signature' ? headers : { ...headers, 'content-digest': contentDigest(body) };
      expect((await send('POST', '/admin/fee-rules', withDigest, body)).statusCode).toBe(201);
      await expect401(await send('POST', '/admin/fee-rules', withDigest, body), 'replayed request');
      expect(await rulesNamed(t, name)).toBe(1);
    },
  );

  it('a forged admin write does not burn the slot of the genuine one', async () => {
    const name = `forged-${randomUUID()}`;
    const body = feeRule(name);
    const genuine = signedHeaders('admin-tool', secretOf('admin-tool'), 'POST', '/admin/fee-rules', body);
    await expect401(await send('POST', '/admin/fee-rules', genuine, feeRule(`${name}-x`)), 'invalid signature');
    expect((await send('POST', '/admin/fee-rules', genuine, body)).statusCode).toBe(201);
  });

  it('leaves replayed reads alone', async () => {
    const headers = signedHeaders('admin-tool', secretOf('admin-tool'), 'GET', '/admin/fee-rules', '');
    for (let i = 0; i < 3; i++) expect((await send('GET', '/admin/fee-rules', headers)).statusCode).toBe(200);
  });
});

describe('two instances', () => {
  // With REDIS_URL the second app shares the first one's replay cache through Redis, as two
  // instances of one deployment do; without it each keeps its own, and a replay sent to the
  // other instance gets through: what a single-instance deployment without Redis accepts.
  const sharing = process.env.REDIS_URL !== undefined;
  let second: TestApp;
  let secondShared: SharedState;
  beforeAll(async () => {
    secondShared = createSharedState(process.env.REDIS_URL, t.shared.prefix);
    second = await startTestApp({ shared: secondShared });
  });
  afterAll(async () => {
    await second?.close();
    await secondShared?.close();
  });

  it(`${sharing ? 'refuses' : 'accepts (no Redis: per instance)'} an admin write replayed on the other instance`, async () => {
    const name = `two-instances-${randomUUID()}`;
    const body = feeRule(name);
    const headers = signedHeaders('admin-tool', secretOf('admin-tool'), 'POST', '/admin/fee-rules', body);
    const json = { 'content-type': 'application/json' };
    expect(
      (await t.app.inject({ method: 'POST', url: '/admin/fee-rules', headers: { ...headers, ...json }, payload: body })).statusCode,
    ).toBe(201);
    const replay = await second.app.inject({ method: 'POST', url: '/admin/fee-rules', headers: { ...headers, ...json }, payload: body });
    expect(replay.statusCode, replay.body).toBe(sharing ? 401 : 201);
    expect(await rulesNamed(second, name)).toBe(sharing ? 0 : 1);
    // Each instance still refuses a replay of what it accepted itself.
    await expect401(
      await second.app.inject({ method: 'POST', url: '/admin/fee-rules', headers: { ...headers, ...json }, payload: body }),
      'replayed request',
    );
  });

  it(`${sharing ? 'refuses' : 'accepts (no Redis: per instance)'} a nonce replayed on the other instance`, async () => {
    const headers = messageSignedHeaders('wallet-api', secretOf('wallet-api'), 'GET', BALANCE_PATH, '');
    expect((await t.app.inject({ method: 'GET', url: BALANCE_PATH, headers })).statusCode).toBe(200);
    expect((await second.app.inject({ method: 'GET', url: BALANCE_PATH, headers })).statusCode).toBe(sharing ? 401 : 200);
  });
});
