import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { signatureMatches, signingString, signRequest } from '../../src/domain/signing.js';

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
});
