import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSigner } from '@payorch/client';
import { describe, expect, it } from 'vitest';
import { type Component, messageSignedHeaders, signatureBase } from '../../src/domain/auth/message-signing.js';
import { verifyMessageSignature } from '../../src/http/plugins/message-signature.js';

interface Vector {
  readonly name: string;
  readonly secret: string;
  readonly serviceId: string;
  readonly method: string;
  readonly path: string;
  readonly rawBody: string;
  readonly userId?: number;
  readonly created: number;
  readonly nonce?: string;
  readonly label: string;
  readonly headers: Record<string, string>;
  readonly signatureBase: string;
  readonly signature: string;
}

const file = JSON.parse(readFileSync(new URL('../vectors-rfc9421.json', import.meta.url), 'utf8')) as {
  vectors: Vector[];
  rfc9421B25: { keyBase64: string; components: Component[]; signatureParams: string; signature: string };
};

const verify = (v: Pick<Vector, 'method' | 'path' | 'headers' | 'rawBody'>, secrets: readonly string[], nowS: number) =>
  verifyMessageSignature(
    { method: v.method, url: v.path, headers: v.headers, rawBody: Buffer.from(v.rawBody) },
    v.headers['signature-input'] ?? '',
    () => secrets,
    nowS,
  );

describe('HTTP Message Signatures against the independent vectors', () => {
  it.each(file.vectors)('the server verifies: $name', (v) => {
    expect(verify(v, ['a-retired-secret', v.secret], v.created + 30)).toMatchObject({ serviceId: v.serviceId, nonce: v.nonce });
    expect(() => verify(v, ['a-retired-secret'], v.created + 30)).toThrow('invalid signature');
    expect(() => verify(v, [v.secret], v.created + 61)).toThrow('timestamp outside window');
  });

  it.each(file.vectors.filter((v) => v.nonce !== undefined && v.label === 'sig1'))('the client signs byte for byte: $name', (v) => {
    const headers = messageSignedHeaders(v.serviceId, v.secret, v.method, v.path, v.rawBody, {
      nowS: v.created,
      ...(v.nonce === undefined ? {} : { nonce: v.nonce }),
      ...(v.userId === undefined ? {} : { userId: v.userId }),
    });
    expect(headers).toEqual(v.headers);
  });

  it.each(file.vectors.filter((v) => v.nonce !== undefined && v.label === 'sig1'))(
    'the client package (Web Crypto, what createPayorchClient sends) signs byte for byte: $name',
    async (v) => {
      const signer = createSigner(v.serviceId, v.secret, 'message');
      const headers = await signer.sign(v.method, v.path, v.rawBody, {
        nowS: v.created,
        ...(v.nonce === undefined ? {} : { nonce: v.nonce }),
        ...(v.userId === undefined ? {} : { userId: v.userId }),
      });
      expect(headers).toEqual(v.headers);
    },
  );

  it('the client refuses an empty secret when it is made, not at its first request', () => {
    expect(() => createSigner('wallet-api', '', 'message')).toThrow(RangeError);
  });

  it('builds the signature base of RFC 9421 Appendix B.2.5 and its HMAC-SHA256', () => {
    const { keyBase64, components, signatureParams, signature } = file.rfc9421B25;
    const base = signatureBase(components, signatureParams);
    expect(createHmac('sha256', Buffer.from(keyBase64, 'base64')).update(base).digest('base64')).toBe(signature);
  });
});

describe('the worked example in docs/SECURITY.md', () => {
  // Checked for being right, not for being a copy: a Go or Python client author works from it.
  const doc = readFileSync(new URL('../../docs/SECURITY.md', import.meta.url), 'utf8');
  const block = (name: string) => {
    const match = new RegExp(`<!-- example:${name} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\\n\`\`\``).exec(doc);
    if (match?.[1] === undefined) throw new Error(`docs/SECURITY.md has no example block ${name}`);
    return match[1];
  };

  it('its Signature is the HMAC of its signature base under its secret, and the server accepts its request', () => {
    const secret = block('secret');
    const base = block('base');
    const headerLines = block('request').split('\n');
    const requestLine = headerLines[0]?.split(' ') ?? [];
    const blank = headerLines.indexOf('');
    const headers = Object.fromEntries(
      headerLines.slice(1, blank).map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
    );
    const rawBody = headerLines.slice(blank + 1).join('\n');
    expect(headers.signature).toBe(`sig1=:${createHmac('sha256', secret).update(base).digest('base64')}:`);
    const created = Number(/;created=(\d+)/.exec(headers['signature-input'] ?? '')?.[1]);
    const request = { method: requestLine[0] ?? '', path: requestLine[1] ?? '', headers, rawBody };
    expect(verify(request, [secret], created)).toMatchObject({ serviceId: 'wallet-api' });
  });
});
