import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface Readiness {
  readonly ready: boolean;
  /** Why, in one line: returned as the body of /readyz. */
  readonly detail: string;
}

export interface StatusServerOptions {
  readonly port: number;
  /** `0.0.0.0` in the pod (the kubelet probes the pod IP, or the node IP with hostNetwork). */
  readonly host: string;
  readonly readiness: () => Readiness;
  /** False once the agent's main loop has died: the kubelet restarts the container. */
  readonly healthy: () => boolean;
  readonly registry: Registry;
}

export interface StatusServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * `/healthz` (liveness), `/readyz` (the startup and readiness probes: 200 only while the
 * driver is ready, which also flips the ready file) and Prometheus `/metrics`.
 */
export async function startStatusServer(options: StatusServerOptions): Promise<StatusServer> {
  const server = createServer((req, res) => {
    void handle(options, req, res);
  });
  // Probes hold no connection open between requests; keep-alive would only delay close().
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}

async function handle(options: StatusServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://agent').pathname;
  const [status, body, contentType] = await respond(options, req.method ?? 'GET', path);
  res.writeHead(status, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
  res.end(body);
}

const TEXT = 'text/plain; charset=utf-8';

async function respond(options: StatusServerOptions, method: string, path: string): Promise<[number, string, string]> {
  if (method !== 'GET' && method !== 'HEAD') return [405, 'method not allowed\n', TEXT];
  switch (path) {
    case '/healthz':
      return options.healthy() ? [200, 'ok\n', TEXT] : [503, 'agent loop stopped\n', TEXT];
    case '/readyz': {
      const r = options.readiness();
      return [r.ready ? 200 : 503, `${r.detail}\n`, TEXT];
    }
    case '/metrics':
      try {
        return [200, await options.registry.metrics(), options.registry.contentType];
      } catch (error) {
        return [500, `${error instanceof Error ? error.message : String(error)}\n`, TEXT];
      }
    default:
      return [404, 'not found\n', TEXT];
  }
}
