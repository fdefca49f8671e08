import {
  CoreV1Api,
  KubeConfig,
  loadAllYaml,
  RbacAuthorizationV1Api,
  type KubernetesObject,
  type V1ClusterRole,
  type V1Role,
} from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planUpgrades } from '../../../coordinator/plan/plan-upgrades.ts';
import { runCoordinator } from '../../../coordinator/run-coordinator.ts';
import { apiStatusCode } from '../../../shared/kube/api-error.ts';
import { createLogger } from '../../../shared/logger.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { installCrd, isPodReady, RolloutWorld } from './harness.ts';

const kc = sharedCluster().kubeConfig();
const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
const world = new RolloutWorld(kc, 'rbac');
const SA = 'driver-rollout-coordinator';
let clusterRoleName = '';
let saConfig: KubeConfig;
const stop = new AbortController();

/** A kubeconfig that authenticates as the ServiceAccount, with a token from the TokenRequest API. */
async function serviceAccountKubeConfig(namespace: string): Promise<KubeConfig> {
  const request = await world.core.createNamespacedServiceAccountToken({ name: SA, namespace, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new Error('admin kubeconfig has no cluster');
  const out = new KubeConfig();
  out.loadFromOptions({
    clusters: [{ ...cluster, name: 'bed' }],
    users: [{ name: 'sa', token: request.status?.token ?? '' }],
    contexts: [{ name: 'sa', cluster: 'bed', user: 'sa' }],
    currentContext: 'sa',
  });
  return out;
}

beforeAll(async () => {
  await installCrd(kc);
  await world.setUp([{}]);
  await world.createDriver('driver:v1');
  const docs = loadAllYaml(await readFile(new URL('../../../manifests/coordinator.yaml', import.meta.url), 'utf8')) as KubernetesObject[];
  const clusterRole = docs.find((d) => d.kind === 'ClusterRole') as V1ClusterRole;
  const role = docs.find((d) => d.kind === 'Role') as V1Role;
  const ns = world.ns.name;
  clusterRoleName = `${clusterRole.metadata?.name ?? ''}-${world.id}`;
  await world.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: SA } } });
  await rbac.createClusterRole({ body: { metadata: { name: clusterRoleName }, rules: clusterRole.rules ?? [] } });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: clusterRoleName },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRoleName },
      subjects: [{ kind: 'ServiceAccount', name: SA, namespace: ns }],
    },
  });
  await rbac.createNamespacedRole({ namespace: ns, body: { metadata: { name: role.metadata?.name ?? '', namespace: ns }, rules: role.rules ?? [] } });
  await rbac.createNamespacedRoleBinding({
    namespace: ns,
    body: {
      metadata: { name: 'leader-election' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata?.name ?? '' },
      subjects: [{ kind: 'ServiceAccount', name: SA, namespace: ns }],
    },
  });
  saConfig = await serviceAccountKubeConfig(ns);
});

afterAll(async () => {
  stop.abort();
  await world.tearDown();
  await rbac.deleteClusterRoleBinding({ name: clusterRoleName });
  await rbac.deleteClusterRole({ name: clusterRoleName });
});

describe('the coordinator with only the permissions of manifests/coordinator.yaml', () => {
  it('upgrades a node (Lease, node patches, eviction, driver pod restart, Events, status)', async () => {
    const node = world.nodeNames[0] ?? '';
    await world.createPod(node, 'workload');
    await world.createRollout({ upgradePolicy: { podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 30 } } });
    const config = { ...world.coordinatorConfig(), leaseName: 'driver-rollout-coordinator' };
    const handle = await runCoordinator(config, { kc: saConfig, logger: createLogger('coordinator', 'warn'), plan: planUpgrades }, stop.signal);
    await world.waitForStates({ [node]: 'upgrade-done' });
    await world.bumpDriver('driver:v2');
    await waitUntil('the node upgraded with the ServiceAccount’s rights', async () => {
      const pod = (await world.driverPods())[0];
      const n = (await world.nodes())[0];
      return pod?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pod) && n !== undefined && world.stateOf(n) === 'upgrade-done' && n.spec?.unschedulable !== true ? true : undefined;
    }, { timeoutMs: 60_000 });
    await world.waitForStatus('one node done', (status) => (status.nodes as { done?: number } | undefined)?.done === 1);
    // Events go out beside the writes (EventQueue): wait for the first.
    await waitUntil('an upgrade Event', async () => ((await world.events(`${world.driver.toUpperCase()}DriverUpgrade`)).length > 0 ? true : undefined), { timeoutMs: 30_000, intervalMs: 200 });
    expect(handle.port).toBeGreaterThan(0);
  });

  it('cannot do what it does not need', async () => {
    const core = saConfig.makeApiClient(CoreV1Api);
    const denied = async (call: () => Promise<unknown>): Promise<number | undefined> => call().then(() => undefined, (e: unknown) => apiStatusCode(e));
    expect(await denied(() => core.deleteNode({ name: world.nodeNames[0] ?? '' }))).toBe(403);
    expect(await denied(() => core.listSecretForAllNamespaces())).toBe(403);
    await world.core.createNamespacedSecret({ namespace: world.ns.name, body: { metadata: { name: 'a-secret' }, stringData: { k: 'v' } } });
    expect(await denied(() => core.listNamespacedSecret({ namespace: world.ns.name }))).toBe(403);
    expect(await denied(() => core.readNamespacedSecret({ name: 'a-secret', namespace: world.ns.name }))).toBe(403);
    expect(await denied(() => core.createNamespacedPod({ namespace: world.ns.name, body: { metadata: { name: 'x' }, spec: { containers: [{ name: 'x', image: 'x' }] } } }))).toBe(403);
  });
});
