import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { toError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';

export interface HttpEndpoints {
  readonly registry: Registry;
  /** `/readyz` answers 200 only while this returns undefined; otherwise the text says why not. */
  readonly notReadyReason: () => string | undefined;
  readonly logger: Logger;
}

/**
 * `/metrics` (Prometheus text format), `/healthz` (the process serves requests) and `/readyz`
 * (caches synced). Both replicas are ready once synced, leader or not: readiness gates
 * traffic to /metrics, not leadership. Resolves with the bound port once listening; the
 * server closes when `signal` aborts.
 */
export async function serveHttp(endpoints: HttpEndpoints, port: number, signal: AbortSignal): Promise<{ port: number; closed: Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path === '/readyz') {
      const reason = endpoints.notReadyReason();
      response.writeHead(reason === undefined ? 200 : 503, { 'content-type': 'text/plain' }).end(`${reason ?? 'ok'}\n`);
      return;
    }
    if (path === '/metrics') {
      endpoints.registry.metrics().then(
        (text) => response.writeHead(200, { 'content-type': endpoints.registry.contentType }).end(text),
        (error: unknown) => {
          endpoints.logger.error({ err: toError(error) }, 'metrics collection failed');
          response.writeHead(500).end();
        },
      );
      return;
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const closed = new Promise<void>((resolve) => {
    const close = (): void => {
      server.close(() => {
        resolve();
      });
      server.closeAllConnections();
    };
    if (signal.aborted) close();
    else signal.addEventListener('abort', close, { once: true });
  });
  return { port: (server.address() as AddressInfo).port, closed };
}
