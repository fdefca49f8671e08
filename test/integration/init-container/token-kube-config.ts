import { KubeConfig } from '@kubernetes/client-node';

/** A kubeconfig for `token` against the same server and CA as `admin`. */
export function tokenKubeConfig(admin: KubeConfig, token: string): string {
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('admin kubeconfig has no cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'test', server: cluster.server, caData: cluster.caData, caFile: cluster.caFile, skipTLSVerify: false }],
    users: [{ name: 'token', token }],
    contexts: [{ name: 'test', cluster: 'test', user: 'token' }],
    currentContext: 'test',
  });
  return kc.exportConfig();
}
