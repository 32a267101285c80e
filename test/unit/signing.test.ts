import { readFileSync } from 'node:fs';
import { createSigner } from '@payorch/client';
import { describe, expect, it } from 'vitest';
import { signatureMatches, signingString, signRequest } from '../../src/domain/auth/signing.js';

const vectors = JSON.parse(readFileSync(new URL('../vectors.json', import.meta.url), 'utf8')) as {
  requestSignatures: Array<{
    secret: string;
    timestamp: number;
    method: string;
    path: string;
    rawBody: string;
    signingString: string;
    signature: string;
  }>;
};

describe('request signature (docs/rules.md R1) against the independent vectors', () => {
  it.each(vectors.requestSignatures)('$method $path', (v) => {
    expect(signingString(v.timestamp, v.method, v.path, v.rawBody)).toBe(v.signingString);
    expect(signRequest(v.secret, v.timestamp, v.method, v.path, v.rawBody)).toBe(v.signature);
    expect(signatureMatches(['old', v.secret], v.signature, String(v.timestamp), v.method, v.path, v.rawBody)).toBe(true);
    expect(signatureMatches(['old'], v.signature, String(v.timestamp), v.method, v.path, v.rawBody)).toBe(false);
  });

  it.each(vectors.requestSignatures)('the client package (Web Crypto) signs it alike: $method $path', async (v) => {
    const headers = await createSigner('vector-service', v.secret, 'x-signature').sign(v.method, v.path, v.rawBody, {
      nowS: v.timestamp,
      userId: 42,
    });
    expect(headers).toEqual({
      'x-service-id': 'vector-service',
      'x-timestamp': String(v.timestamp),
      'x-signature': v.signature,
      'x-user-id': '42',
    });
  });
});
