import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhook, type WebhookEvent } from '@payorch/client';

/**
 * A webhook receiver as a merchant would write one: node:http on a loopback port, every request
 * checked with verifyWebhook against the service's secret, repeats told apart by their
 * Idempotency-Key. `answer` decides each reply, so a test can fail the first attempts.
 */
export interface WebhookReceiver {
  readonly url: string;
  /** Every request in arrival order, valid or not. */
  readonly requests: ReceivedWebhook[];
  /** The first acknowledged copy of each event, in the order they were acknowledged. */
  readonly acknowledged: WebhookEvent[];
  /** How to answer the next request: a status, or 'hang' to never answer. 200 by default. */
  answer: (request: ReceivedWebhook) => number | 'hang';
  /** The acknowledged events of one intent, in order. */
  eventsOf(intentId: string): WebhookEvent[];
  close(): Promise<void>;
}

export interface ReceivedWebhook {
  readonly idempotencyKey: string | undefined;
  readonly valid: boolean;
  readonly reason: string | undefined;
  readonly event: WebhookEvent | undefined;
}

export async function startWebhookReceiver(secret: string, path = '/hooks/payorch'): Promise<WebhookReceiver> {
  const requests: ReceivedWebhook[] = [];
  const acknowledged: WebhookEvent[] = [];
  const seen = new Set<string>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      const verified = await verifyWebhook(
        { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks) },
        secret,
      );
      const header = request.headers['idempotency-key'];
      const received: ReceivedWebhook = {
        idempotencyKey: typeof header === 'string' ? header : undefined,
        valid: verified.valid,
        reason: verified.valid ? undefined : verified.reason,
        event: verified.valid ? verified.event : undefined,
      };
      requests.push(received);
      const status = verified.valid ? receiver.answer(received) : 401;
      if (status === 'hang') return;
      if (verified.valid && status >= 200 && status < 300 && !seen.has(verified.idempotencyKey)) {
        seen.add(verified.idempotencyKey);
        acknowledged.push(verified.event);
      }
      response.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const receiver: WebhookReceiver = {
    url: `http://127.0.0.1:${port}${path}?source=payorch`,
    requests,
    acknowledged,
    answer: () => 200,
    eventsOf: (intentId) => acknowledged.filter((event) => event.intentId === intentId),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}
