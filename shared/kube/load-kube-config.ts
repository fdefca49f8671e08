import { KubeConfig } from '@kubernetes/client-node';

/**
 * A kubeconfig from a file when `path` is given, else the pod's in-cluster service account.
 * Every program takes its credentials through this one function.
 */
export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path !== undefined && path !== '') kc.loadFromFile(path);
  else kc.loadFromCluster();
  return kc;
}
