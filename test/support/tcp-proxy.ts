import { createServer, type Server, type Socket, connect } from 'node:net';

/**
 * A TCP proxy between the service and its database, which a test can cut: the outage of one
 * test's connections only, without restarting a server that other test files share.
 *
 *   cut('reset')  every open connection is reset and new ones are refused at once, as while
 *                 PostgreSQL restarts;
 *   cut('stall')  open connections are reset, new ones are accepted but never answered, as in a
 *                 network partition (the client has only its own time-outs to save it);
 *   restore()     new connections are forwarded again.
 */
export interface TcpProxy {
  readonly port: number;
  cut(mode: 'reset' | 'stall'): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let mode: 'open' | 'reset' | 'stall' = 'open';
  const pairs = new Set<Socket>();
  const server: Server = createServer((client) => {
    pairs.add(client);
    client.on('close', () => pairs.delete(client));
    client.on('error', () => {});
    if (mode === 'reset') {
      client.resetAndDestroy();
      return;
    }
    if (mode === 'stall') return; // held open, never forwarded: the client waits on its own clock
    // As PostgreSQL and connection poolers do: with Nagle's algorithm on, a client's pipelined
    // statements would wait here for the server's delayed acknowledgement (~40 ms each).
    client.setNoDelay(true);
    const upstream = connect({ port: targetPort, host: targetHost, noDelay: true });
    pairs.add(upstream);
    upstream.on('close', () => {
      pairs.delete(upstream);
      client.destroy();
    });
    client.on('close', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no TCP address');
  return {
    port: address.port,
    cut(next) {
      mode = next;
      for (const socket of pairs) socket.resetAndDestroy();
    },
    restore() {
      mode = 'open';
      // Stalled connections were never forwarded; end them so their clients fail and retry.
      for (const socket of pairs) socket.destroy();
    },
    async close() {
      for (const socket of pairs) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
