import { KubeConfig } from '@kubernetes/client-node';
import { cacheTlsFiles } from './cache-tls-files.ts';
import { shareApiConnections } from './share-api-connections.ts';

/**
 * A kubeconfig from a file when `path` is given, else the pod's in-cluster service account.
 * Every program takes its credentials through this one function, and with them one keep-alive
 * connection pool for all of its API traffic (see shareApiConnections), its TLS files read at
 * most every TLS_FILES_RECHECK_MS (see cacheTlsFiles).
 */
export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path !== undefined && path !== '') kc.loadFromFile(path);
  else kc.loadFromCluster();
  return shareApiConnections(cacheTlsFiles(kc));
}
