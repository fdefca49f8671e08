import { KubeConfig, RequestContext } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { classifyApiRequest } from '../../../../shared/kube/api-connection-pool.ts';
import { shareApiConnections } from '../../../../shared/kube/share-api-connections.ts';

const FAKE_PEM = (body: string): string => Buffer.from(`-----BEGIN CERTIFICATE-----\n${Buffer.from(body).toString('base64')}\n-----END CERTIFICATE-----\n`).toString('base64');

function aKubeConfig(caBody = 'ca-1', server = 'https://127.0.0.1:6443'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, caData: FAKE_PEM(caBody), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

async function dispatcherOf(kc: KubeConfig, path = '/api/v1/nodes'): Promise<unknown> {
  const context = new RequestContext(`${kc.getCurrentCluster()?.server ?? ''}${path}`, 'GET');
  await kc.applySecurityAuthentication(context);
  return context.getDispatcher();
}

describe('shareApiConnections', () => {
  it('client-node on its own builds a new dispatcher (so a new connection) for every request', async () => {
    const kc = aKubeConfig();
    expect(await dispatcherOf(kc)).not.toBe(await dispatcherOf(kc));
  });

  it('gives every request of the program the same dispatcher, and keeps the credentials', async () => {
    const kc = shareApiConnections(aKubeConfig());
    const first = await dispatcherOf(kc);
    expect(first).toBeDefined();
    expect(await dispatcherOf(kc, '/api/v1/pods?watch=true')).toBe(first);
    expect(await dispatcherOf(kc, '/apis/coordination.k8s.io/v1/namespaces/a/leases/b')).toBe(first);
    const context = new RequestContext('https://127.0.0.1:6443/api/v1/nodes', 'GET');
    await kc.applySecurityAuthentication(context);
    expect(context.getHeaders().Authorization).toBe('Bearer secret-token');
  });

  it('starts a new pool when the TLS material changes (a rotated CA), not before', async () => {
    const kc = shareApiConnections(aKubeConfig('ca-1'));
    const first = await dispatcherOf(kc);
    const cluster = kc.getCurrentCluster();
    if (cluster === null) throw new Error('no cluster');
    (cluster as { caData?: string }).caData = FAKE_PEM('ca-2');
    const second = await dispatcherOf(kc);
    expect(second).not.toBe(first);
    expect(await dispatcherOf(kc)).toBe(second);
  });
});

describe('classifyApiRequest', () => {
  it.each([
    ['/api/v1/pods?watch=true&resourceVersion=12&allowWatchBookmarks=true', 'watch'],
    ['/api/v1/namespaces/a/pods?watch=1', 'watch'],
    ['/api/v1/pods?watch=false', 'request'],
    ['/api/v1/pods?labelSelector=watch%3Dtrue', 'request'],
    ['/apis/coordination.k8s.io/v1/namespaces/a/leases/coordinator', 'lease'],
    ['/apis/coordination.k8s.io/v1/leases?watch=true', 'watch'],
    ['/api/v1/nodes/n1', 'request'],
    ['/apis/driver-rollout.io/v1alpha1/namespaces/a/driverrollouts/r/status', 'request'],
  ])('%s → %s', (path, expected) => {
    expect(classifyApiRequest(path)).toBe(expected);
  });
});
