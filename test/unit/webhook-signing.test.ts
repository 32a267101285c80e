import { createHash, createHmac } from 'node:crypto';
import { verifyWebhook } from '@payorch/client';
import { describe, expect, it } from 'vitest';
import { webhookSignedHeaders } from '../../src/domain/auth/message-signing.js';
import { WEBHOOK_RETRY_DELAY_MAX_MS, webhookIsDead, webhookRetryDelayMs } from '../../src/domain/events/webhooks/retry-schedule.js';

const secret = 'wallet-api-secret';
const body = '{"cursor":"c1","intentId":"0f7c","statusTo":"SETTLED"}';
const created = 1_767_225_600;
const headers = webhookSignedHeaders(secret, '/hooks/payorch', body, created);
const verify = async (
  changes: { headers?: Record<string, string>; body?: string; url?: string; method?: string } = {},
  nowS = created + 5,
) => {
  const result = await verifyWebhook(
    {
      method: changes.method ?? 'POST',
      url: changes.url ?? '/hooks/payorch?source=x',
      headers: { ...headers, ...changes.headers },
      body: changes.body ?? body,
    },
    secret,
    nowS,
  );
  return result.valid ? result : result.reason;
};

describe('webhook signatures', () => {
  it('sign "@method" "@path" "content-digest" with created and keyid="payorch", as a receiver in any language rebuilds them', () => {
    const digest = `sha-256=:${createHash('sha256').update(body).digest('base64')}:`;
    const params = `("@method" "@path" "content-digest");created=${created};keyid="payorch"`;
    const base = `"@method": POST\n"@path": /hooks/payorch\n"content-digest": ${digest}\n"@signature-params": ${params}`;
    expect(headers).toEqual({
      'content-digest': digest,
      'signature-input': `sig1=${params}`,
      signature: `sig1=:${createHmac('sha256', secret).update(base).digest('base64')}:`,
    });
  });

  it('verify with the service secret, whatever query the receiver URL carries, from a target or a full URL and Headers', async () => {
    const event = JSON.parse(body);
    expect(await verify()).toEqual({ valid: true, event, idempotencyKey: 'c1' });
    const fetchShaped = await verifyWebhook(
      {
        method: 'POST',
        url: 'https://shop.example/hooks/payorch?a=1',
        headers: new Headers(headers),
        body: new TextEncoder().encode(body),
      },
      secret,
      created,
    );
    expect(fetchShaped).toEqual({ valid: true, event, idempotencyKey: 'c1' });
  });

  it.each([
    ['a changed body', { body: body.replace('SETTLED', 'FAILED') }, 'content digest mismatch'],
    ['another path', { url: '/hooks/other' }, 'invalid signature'],
    ['another method', { method: 'PUT' }, 'a webhook is a POST'],
    ['another secret', { headers: webhookSignedHeaders('guess', '/hooks/payorch', body, created) }, 'invalid signature'],
    [
      'a signature that leaves out the digest',
      { headers: { 'signature-input': `sig1=("@method" "@path");created=${created};keyid="payorch"` } },
      'not that of a payorch webhook',
    ],
    [
      'another keyid',
      { headers: { 'signature-input': headers['signature-input']?.replace('payorch', 'wallet-api') ?? '' } },
      'not that of a payorch webhook',
    ],
    [
      'another body with its own digest',
      {
        body: '{"cursor":"c1"}',
        headers: { 'content-digest': `sha-256=:${createHash('sha256').update('{"cursor":"c1"}').digest('base64')}:` },
      },
      'invalid signature',
    ],
    ['no signature', { headers: { signature: '' } }, 'malformed Signature'],
    ['a signature with another label', { headers: { signature: headers.signature?.replace('sig1', 'sig2') ?? '' } }, 'malformed Signature'],
  ])('refuse %s', async (_, changes, message) => {
    expect(await verify(changes)).toContain(message);
  });

  it('refuse a signature created more than 60 s before it is checked (a replay)', async () => {
    expect(await verify({}, created + 61)).toContain('outside the ±60 s window');
  });
});

describe('webhook retry schedule', () => {
  it('waits base × 2^(n−1) within ±25 %, never over an hour', () => {
    expect(webhookRetryDelayMs(1000, 1, () => 0.5)).toBe(1000);
    expect(webhookRetryDelayMs(1000, 3, () => 0)).toBe(3000);
    expect(webhookRetryDelayMs(1000, 3, () => 0.999_999)).toBe(5000);
    expect(webhookRetryDelayMs(1000, 40, () => 0.999_999)).toBe(WEBHOOK_RETRY_DELAY_MAX_MS);
    expect(webhookRetryDelayMs(1000, 40, () => 0)).toBe(WEBHOOK_RETRY_DELAY_MAX_MS * 0.75);
  });

  it('is dead once the next attempt would start after the window', () => {
    expect(webhookIsDead(70 * 3600_000, 3600_000, 72 * 3600_000)).toBe(false);
    expect(webhookIsDead(71.5 * 3600_000, 3600_000, 72 * 3600_000)).toBe(true);
  });
});
