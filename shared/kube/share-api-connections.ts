import { isDeepStrictEqual } from 'node:util';
import type { Cluster, ConnectOptions, KubeConfig } from '@kubernetes/client-node';
import type { Dispatcher } from 'undici';
import { DriverRolloutError } from '../errors.ts';
import { createApiConnectionPool, DEFAULT_API_CONNECTION_POOL, type ApiConnectOptions, type ApiConnectionPool, type ApiConnectionPoolOptions } from './api-connection-pool.ts';

type CreateDispatcher = (cluster: Cluster | null, agentOptions: object) => Dispatcher | undefined;

/**
 * Makes every API client `kc` builds share one keep-alive connection pool.
 *
 * client-node 2.0.1 builds a new undici Agent for every request in its (TypeScript-private)
 * `KubeConfig.createDispatcher`, so each request opens a new TCP+TLS connection (tens of ms, seconds
 * under load) and the API server sees one connection per request. This
 * replaces that method on this instance with one that returns the same pool while the TLS
 * material is unchanged (compared byte for byte); when it changes (a rotated certificate, read
 * again from its file every TLS_FILES_RECHECK_MS: cacheTlsFiles), the next request gets a new
 * pool and the old one closes once its requests end. Proxy and plain-HTTP
 * configurations keep client-node's own behaviour.
 */
export function shareApiConnections(kc: KubeConfig, options: ApiConnectionPoolOptions = DEFAULT_API_CONNECTION_POOL): KubeConfig {
  const hook = kc as unknown as { createDispatcher?: unknown };
  const original = hook.createDispatcher;
  if (typeof original !== 'function') {
    throw new DriverRolloutError('@kubernetes/client-node has no KubeConfig.createDispatcher to share connections through; check shareApiConnections against its source', {});
  }
  const ownDispatcher = original as CreateDispatcher;
  let current: { server: string; connect: ConnectOptions; pool: ApiConnectionPool } | undefined;
  const createDispatcher: CreateDispatcher = (cluster, agentOptions) => {
    const planned = kc.createDispatcherOptions(cluster, agentOptions);
    if (planned.type !== 'agent') return ownDispatcher.call(kc, cluster, agentOptions);
    const server = cluster?.server ?? '';
    // Byte-equal material (client-node builds new buffers for every request) may share connections.
    if (current === undefined || current.server !== server || !isDeepStrictEqual(current.connect, planned.connect)) {
      const previous = current?.pool;
      // client-node hands these same options to undici's Agent; only their optional-field typing differs.
      current = { server, connect: planned.connect, pool: createApiConnectionPool(planned.connect as ApiConnectOptions, options) };
      void previous?.close();
    }
    return current.pool.dispatcher;
  };
  hook.createDispatcher = createDispatcher;
  return kc;
}
