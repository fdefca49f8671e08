import { connect, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Forwards every connection to `listenHost` (port chosen by the OS) to `target` byte for byte; TLS
 * passes through untouched. The test bed's API server listens on loopback only; pods outside the
 * host's network reach it here, on their node's bridge address.
 */
export async function startTcpProxy(listenHost: string, target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    track(client);
    track(upstream);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, listenHost, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error(`tcp proxy on ${listenHost}: no port`);
  return {
    port: address.port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    },
  };
}
