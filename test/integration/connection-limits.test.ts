import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';

/**
 * docs/rules.md R61: a connection that never finishes its request is answered 408 and closed
 * within REQUEST_TIMEOUT_MS (headers within 10 s, or sooner when the request limit is lower), and
 * at most MAX_CONNECTIONS are open: one more is closed at once, the ones open keep their service.
 */

const REQUEST_TIMEOUT_MS = 1_500;
const MAX_CONNECTIONS = 6;
let t: TestApp;
let port: number;

beforeAll(async () => {
  t = await startTestApp({ env: { REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS), MAX_CONNECTIONS: String(MAX_CONNECTIONS) } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  port = typeof address === 'object' && address !== null ? address.port : 0;
});
afterAll(async () => t?.close());

/** Opens a connection and writes `prefix`; resolves with the socket and, later, with everything the server sent before it closed. */
function hold(prefix: string): Promise<{ socket: Socket; answer: Promise<{ text: string; afterMs: number }> }> {
  return new Promise((resolve, reject) => {
    const openedAt = performance.now();
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(prefix);
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
      });
      const answer = new Promise<{ text: string; afterMs: number }>((done) => {
        socket.on('close', () => done({ text, afterMs: performance.now() - openedAt }));
      });
      resolve({ socket, answer });
    });
    socket.on('error', reject);
  });
}

const health = async () => (await fetch(`http://127.0.0.1:${port}/health`, { headers: { connection: 'close' } })).status;

describe('request time-outs', () => {
  it('answers 408 and closes a connection whose headers never finish', async () => {
    const { answer } = await hold('GET /health HTTP/1.1\r\nHost: x\r\n');
    const { text, afterMs } = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 408/);
    expect(afterMs).toBeLessThan(REQUEST_TIMEOUT_MS + 2_500);
  });

  it('answers 408 and closes a connection whose body never finishes', async () => {
    const { answer } = await hold(
      'POST /intents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":',
    );
    const { text, afterMs } = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 408/);
    expect(afterMs).toBeLessThan(REQUEST_TIMEOUT_MS + 2_500);
  });
});

describe('the connection cap', () => {
  it('closes a connection past MAX_CONNECTIONS at once; the ones open are served; a slot freed is used again', async () => {
    const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => hold('')));
    const { answer } = await hold('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    const refused = await answer;
    expect(refused.text).toBe('');
    expect(refused.afterMs).toBeLessThan(1_000);
    // A held connection still gets its answer.
    const [first, ...rest] = held;
    first?.socket.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect((await first?.answer)?.text).toMatch(/^HTTP\/1\.1 200/);
    for (const { socket } of rest) socket.destroy();
    await Promise.all(rest.map(({ answer: closed }) => closed));
    expect(await health()).toBe(200);
  });
});
