import type { KubernetesObject, V1Container, V1DaemonSet, V1Deployment } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { adaptToRealNode, shippedObjects, type RealNodeSite } from '../../real-node/shipped-objects.ts';

const site: RealNodeSite = {
  apiPort: 6443,
  nodeSelector: { 'driver-rollout.test/real-node': 'true' },
  hostDir: '/tmp/bed/node',
  agentPorts: { 'driver-rollout-gpu': 18080, 'gpu-driver': 18080 },
  podApi: { host: 'kubernetes.default.svc', ip: '10.250.7.1', port: 40123 },
  drainSkipLabels: ['nvidia.com/gpu-driver-upgrade-drain.skip', 'nvidia.com/nic-driver-upgrade-drain.skip'],
};
let shipped: KubernetesObject[];
let adapted: KubernetesObject[];
const containers = (d: V1DaemonSet | V1Deployment): V1Container[] => [...(d.spec?.template.spec?.initContainers ?? []), ...(d.spec?.template.spec?.containers ?? [])];

beforeAll(async () => {
  shipped = await shippedObjects();
  adapted = adaptToRealNode(shipped, site);
});

describe('adaptToRealNode (test/real-node): only the documented changes to the shipped objects', () => {
  it('keeps every object, in order, and all but the DaemonSet and the Deployment as they are', () => {
    expect(adapted.map((o) => `${o.kind ?? ''}/${o.metadata?.name ?? ''}`)).toEqual(shipped.map((o) => `${o.kind ?? ''}/${o.metadata?.name ?? ''}`));
    for (const [i, o] of adapted.entries()) {
      if (o.kind !== 'DaemonSet' && o.kind !== 'Deployment') expect(o).toEqual(shipped[i]);
    }
  });

  it('driver DaemonSet: host network, loopback API and probes, writable host paths moved, /sys read-only; images, commands and privileges as shipped', () => {
    const ds = adapted.find((o) => o.kind === 'DaemonSet') as V1DaemonSet;
    const pod = ds.spec?.template.spec;
    expect(pod?.hostNetwork).toBe(true);
    expect(pod?.nodeSelector).toMatchObject(site.nodeSelector);
    const agent = pod?.containers.find((c) => c.name === 'agent');
    expect(agent?.env).toEqual(expect.arrayContaining([
      { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
      { name: 'KUBERNETES_SERVICE_PORT', value: '6443' },
      { name: 'HTTP_PORT', value: '18080' },
      { name: 'KERNEL_ADAPTER', value: 'real' },
    ]));
    expect(agent?.readinessProbe?.httpGet?.host).toBe('127.0.0.1');
    const hostPaths = (pod?.volumes ?? []).flatMap((v) => (v.hostPath === undefined ? [] : [v.hostPath.path]));
    expect(hostPaths.filter((p) => p.startsWith('/run') || p.startsWith('/var'))).toEqual([]);
    expect(hostPaths).toContain('/tmp/bed/node/host/run/driver-rollout');
    const sysMounts = containers(ds).flatMap((c) => c.volumeMounts ?? []).filter((m) => m.name === 'host-sys' || m.name === 'host-lib-modules');
    expect(sysMounts.length).toBeGreaterThan(0);
    expect(sysMounts.every((m) => m.readOnly === true)).toBe(true);
    const shippedDs = shipped.find((o) => o.kind === 'DaemonSet') as V1DaemonSet;
    const identity = (d: V1DaemonSet): unknown => containers(d).map((c) => [c.image, c.command, c.securityContext]);
    expect(identity(ds)).toEqual(identity(shippedDs));
    expect(pod?.hostPID).toBe(true);
    expect(pod?.readinessGates).toEqual(shippedDs.spec?.template.spec?.readinessGates);
  });

  it('coordinator Deployment: replicas, ports and probes as shipped on the pod network, the API server through the node\'s proxy, skipped by the drain; non-root as shipped', () => {
    const deployment = adapted.find((o) => o.kind === 'Deployment') as V1Deployment;
    const shippedDeployment = shipped.find((o) => o.kind === 'Deployment') as V1Deployment;
    expect(deployment.spec?.replicas).toBe(shippedDeployment.spec?.replicas);
    const pod = deployment.spec?.template.spec;
    expect(pod?.hostNetwork).toBeUndefined();
    expect(pod?.nodeSelector).toMatchObject(site.nodeSelector);
    expect(pod?.hostAliases).toEqual([{ ip: '10.250.7.1', hostnames: ['kubernetes.default.svc'] }]);
    const coordinator = containers(deployment)[0];
    expect(coordinator?.env).toEqual(expect.arrayContaining([
      { name: 'KUBERNETES_SERVICE_HOST', value: 'kubernetes.default.svc' },
      { name: 'KUBERNETES_SERVICE_PORT', value: '40123' },
    ]));
    const asShipped = (c: V1Container | undefined): unknown => [c?.args, c?.ports, c?.readinessProbe, c?.livenessProbe, c?.startupProbe];
    expect(asShipped(coordinator)).toEqual(asShipped(containers(shippedDeployment)[0]));
    for (const label of site.drainSkipLabels) expect(deployment.spec?.template.metadata?.labels?.[label]).toBe('true');
    expect(pod?.securityContext?.runAsNonRoot).toBe(true);
  });
});
