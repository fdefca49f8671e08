import { createHash } from 'node:crypto';
import type { Cluster, ConnectOptions, KubeConfig } from '@kubernetes/client-node';
import type { Dispatcher } from 'undici';
import { DriverRolloutError } from '../errors.ts';
import { createApiConnectionPool, DEFAULT_API_CONNECTION_POOL, type ApiConnectOptions, type ApiConnectionPool, type ApiConnectionPoolOptions } from './api-connection-pool.ts';

type CreateDispatcher = (cluster: Cluster | null, agentOptions: object) => Dispatcher | undefined;

/**
 * Makes every API client `kc` builds share one keep-alive connection pool.
 *
 * client-node 2.0.1 builds a new undici Agent for every request in its (TypeScript-private)
 * `KubeConfig.createDispatcher`, so each request opens a new TCP+TLS connection (72–114 ms on a
 * quiet machine, seconds under load) and the API server sees one connection per request. This
 * replaces that method on this instance with one that returns the same pool while the TLS
 * material is unchanged; when the files behind it change (a rotated certificate), the next
 * request gets a new pool and the old one closes once its requests end. Proxy and plain-HTTP
 * configurations keep client-node's own behaviour.
 */
export function shareApiConnections(kc: KubeConfig, options: ApiConnectionPoolOptions = DEFAULT_API_CONNECTION_POOL): KubeConfig {
  const hook = kc as unknown as { createDispatcher?: unknown };
  const original = hook.createDispatcher;
  if (typeof original !== 'function') {
    throw new DriverRolloutError('@kubernetes/client-node has no KubeConfig.createDispatcher to share connections through; check shareApiConnections against its source', {});
  }
  const ownDispatcher = original as CreateDispatcher;
  let current: { key: string; pool: ApiConnectionPool } | undefined;
  const createDispatcher: CreateDispatcher = (cluster, agentOptions) => {
    const planned = kc.createDispatcherOptions(cluster, agentOptions);
    if (planned.type !== 'agent') return ownDispatcher.call(kc, cluster, agentOptions);
    const key = tlsKey(cluster?.server ?? '', planned.connect);
    if (current?.key !== key) {
      const previous = current?.pool;
      // client-node hands these same options to undici's Agent; only their optional-field typing differs.
      current = { key, pool: createApiConnectionPool(planned.connect as ApiConnectOptions, options) };
      void previous?.close();
    }
    return current.pool.dispatcher;
  };
  hook.createDispatcher = createDispatcher;
  return kc;
}

/** A digest of the server and TLS material: equal keys may share connections. */
function tlsKey(server: string, connect: ConnectOptions): string {
  const hash = createHash('sha256').update(server);
  for (const [name, value] of Object.entries(connect).sort(([a], [b]) => a.localeCompare(b))) {
    hash.update(`\0${name}=`);
    for (const part of [value].flat()) hash.update(Buffer.isBuffer(part) ? part : `${typeof part}:${JSON.stringify(part)}`);
  }
  return hash.digest('hex');
}
