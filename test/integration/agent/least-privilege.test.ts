import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLoadedDriver } from '../../../shared/driver-identity.ts';
import { driverKeys } from '../../../shared/keys.ts';
import { parseSignatureVerdict } from '../../../shared/module-signature-verdict.ts';
import { parseKernelSignaturePolicy } from '../../../shared/kernel-signature-policy.ts';
import { apiErrorMessage, apiStatusCode } from '../../../shared/kube/api-error.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { aNicOnlyNode } from '../../fixtures/sysfs/sysfs-tree.ts';
import { writeSampleDriverSource } from '../../unit/agent/agent-fixtures.ts';
import { installedHeadersKernel } from '../../unit/agent/build/sample-driver.ts';
import { applyDriverSecurity, waitForDriverPolicy, type DriverSecurity } from '../init-container/apply-driver-security.ts';
import { tokenKubeConfig } from '../init-container/token-kube-config.ts';
import { TEST_NODE_LABEL, uniqueTestId } from '../test-bed/fixtures.ts';
import { AGENT_TEST_TIMEOUT_MS, FIRST_LOAD_HANG_MS, startAgentProcess } from './agent-process.ts';

// The agent with the identity the DaemonSet gives it: manifests/driver-rbac.yaml and
// manifests/safe-load-policy.yaml as shipped, and a token bound to its pod (what the kubelet
// projects). Everything it writes must be allowed: the pod condition, the node labels and
// annotations, Events.

const admin = sharedCluster().kubeConfig();
const core = admin.makeApiClient(CoreV1Api);
const id = uniqueTestId('agent-lp');
const nodeName = `${id}-n`;
const otherNode = `${id}-other`;
const keys = driverKeys('ofed', 'nvidia.com');
const pod = 'ofed-driver-lp';
let ns: TestNamespace;
let security: DriverSecurity;
let scratch: string;
let kubeconfigPath: string;
let driverKc: KubeConfig;

beforeAll(async () => {
  ns = await createTestNamespace(admin, 'agent-lp');
  security = await applyDriverSecurity(admin, ns.name, id);
  await createFakeNodes(admin, [
    { name: nodeName, labels: { [TEST_NODE_LABEL]: id } },
    { name: otherNode, labels: { [TEST_NODE_LABEL]: id } },
  ]);
  const created = await core.createNamespacedPod({
    namespace: ns.name,
    body: {
      metadata: { name: pod },
      spec: {
        serviceAccountName: security.serviceAccount,
        nodeName,
        automountServiceAccountToken: false,
        readinessGates: [{ conditionType: keys.driverReadyCondition }],
        containers: [{ name: 'agent', image: 'driver-rollout/agent:test' }],
      },
    },
  });
  const request = await core.createNamespacedServiceAccountToken({
    name: security.serviceAccount,
    namespace: ns.name,
    body: { spec: { audiences: [], expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod, uid: created.metadata?.uid ?? '' } } },
  });
  scratch = await mkdtemp(join(tmpdir(), 'agent-lp-'));
  kubeconfigPath = join(scratch, 'driver.kubeconfig');
  await writeFile(kubeconfigPath, tokenKubeConfig(admin, request.status?.token ?? ''));
  driverKc = new KubeConfig();
  driverKc.loadFromFile(kubeconfigPath);
  const driverCore = driverKc.makeApiClient(CoreV1Api);
  await waitForDriverPolicy('the driver admission policy to be enforced', () =>
    driverCore.patchNode({ name: nodeName, dryRun: 'All', body: { spec: { unschedulable: true } } }, MERGE_PATCH));
}, 180_000);

afterAll(async () => {
  await ns.delete();
  await deleteFakeNodes(admin, [nodeName, otherNode]);
  await security.delete();
  await rm(scratch, { recursive: true, force: true });
});

describe('the agent with the driver service account (token bound to its pod)', () => {
  it('writes its pod condition, its node labels and its node Events, and nothing it writes is refused', async () => {
    const agent = startAgentProcess({
      NODE_NAME: nodeName,
      POD_NAME: pod,
      POD_NAMESPACE: ns.name,
      DRIVER_NAME: 'ofed',
      DRIVER_VERSION: '24.10-1.1.4.0',
      DRIVER_SOURCE_DIR: await writeSampleDriverSource(join(scratch, 'src'), '24.10'),
      KERNEL_VERSION: installedHeadersKernel(),
      SYSFS_ROOT: await aNicOnlyNode().writeTo(join(scratch, 'sys')),
      MODULE_ROOT: join(scratch, 'root'),
      MODPROBE_CONFIG_DIR: join(scratch, 'modprobe.d'),
      CACHE_DIR: join(scratch, 'cache'),
      READY_FILE: join(scratch, 'run', '.driver-ready'),
      LOCK_PATH: join(scratch, 'run', 'agent.lock'),
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      KERNEL_ADAPTER: 'simulated',
      KUBECONFIG: kubeconfigPath,
    });
    try {
      await waitUntil('the pod Ready through its gate', async () => {
        const p = await core.readNamespacedPod({ name: pod, namespace: ns.name });
        return p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? p : undefined;
      }, { timeoutMs: FIRST_LOAD_HANG_MS, intervalMs: 200 });
      const labels = await waitUntil('the driver labels on the node', async () => {
        const l = (await core.readNode({ name: nodeName })).metadata?.labels ?? {};
        return l[keys.driverReady] === 'true' ? l : undefined;
      });
      expect(labels).toMatchObject({ [keys.devicePresent]: 'true', [keys.deviceCount]: '2', [keys.driverVersion]: '24.10-1.1.4.0' });
      // Written in the same patch as the labels: what is loaded, and by which pod (the coordinator's restart-only path).
      const annotations = (await core.readNode({ name: nodeName })).metadata?.annotations ?? {};
      const loaded = parseLoadedDriver(annotations[keys.driverLoaded]);
      expect(loaded).toMatchObject({ pod: `${ns.name}/${pod}`, version: '24.10-1.1.4.0' });
      // Handed to its writer before the load: the kernel's verdict on the modules' signatures, about the
      // identity loaded (accepted: the load went on; this kernel enforces nothing or trusts them).
      const verdict = await waitUntil('the module-signature verdict on the node', async () =>
        parseSignatureVerdict((await core.readNode({ name: nodeName })).metadata?.annotations?.[keys.moduleSignatures] ?? '') ?? undefined);
      expect(verdict).toMatchObject({ fingerprint: loaded?.fingerprint, kernel: installedHeadersKernel(), untrusted: [] });
      // Handed to its writer at its start, before the build: the node's own signature facts, about
      // the running kernel (the coordinator judges a new template's declared signer by them).
      const facts = await waitUntil('the kernel signature policy on the node', async () =>
        parseKernelSignaturePolicy((await core.readNode({ name: nodeName })).metadata?.annotations?.[keys.kernelSignaturePolicy] ?? '') ?? undefined);
      expect(facts.kernel).toBe(release());
      const events = await waitUntil('the DriverLoaded Event on the node', async () => {
        const list = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=Node,involvedObject.name=${nodeName}` });
        const found = list.items.filter((e) => e.reason === 'DriverLoaded');
        return found.length > 0 ? found : undefined;
      }, { timeoutMs: 15_000 });
      expect(events[0]?.source?.component).toBe('driver-rollout-agent');
      agent.signal('SIGTERM');
      expect(await agent.exited).toBe(0);
      // Its whole log, read once it has exited: API writes that failed are logged as "cannot ..."
      // with the server's status and message.
      const refused = agent.lines.filter((l) => (l.level === 'warn' || l.level === 'error') && l.msg.startsWith('cannot '));
      expect(refused.map((l) => `${l.msg}: ${JSON.stringify(l.why ?? l.err)}`)).toEqual([]);
    } finally {
      if (!agent.hasExited()) agent.signal('SIGKILL');
      await agent.exited;
    }
  }, AGENT_TEST_TIMEOUT_MS);

  it('is denied what it does not need: secrets, another node, evictions, pods of others', async () => {
    const driverCore = driverKc.makeApiClient(CoreV1Api);
    const workload = await core.createNamespacedPod({
      namespace: ns.name,
      body: { metadata: { name: 'workload' }, spec: { nodeName, containers: [{ name: 'w', image: 'work:v1' }] } },
    });
    await core.createNamespacedSecret({ namespace: ns.name, body: { metadata: { name: 'a-secret' }, stringData: { k: 'v' } } });
    const refused = async (call: () => Promise<unknown>): Promise<{ status: number | undefined; message: string }> =>
      call().then(() => ({ status: 200, message: '' }), (e: unknown) => ({ status: apiStatusCode(e), message: apiErrorMessage(e) }));
    const denials = {
      'list secrets in all namespaces': await refused(() => driverCore.listSecretForAllNamespaces()),
      'list secrets in its namespace': await refused(() => driverCore.listNamespacedSecret({ namespace: ns.name })),
      'read a secret in its namespace': await refused(() => driverCore.readNamespacedSecret({ name: 'a-secret', namespace: ns.name })),
      'label another node with its own labels': await refused(() =>
        driverCore.patchNode({ name: otherNode, body: { metadata: { labels: { [keys.driverReady]: 'true' } } } }, MERGE_PATCH)),
      'cordon another node': await refused(() => driverCore.patchNode({ name: otherNode, body: { spec: { unschedulable: true } } }, MERGE_PATCH)),
      'evict a pod on its own node': await refused(() =>
        driverCore.createNamespacedPodEviction({ name: 'workload', namespace: ns.name, body: { metadata: { name: 'workload', namespace: ns.name } } })),
      'delete a pod on its own node': await refused(() => driverCore.deleteNamespacedPod({ name: 'workload', namespace: ns.name })),
    };
    for (const [what, result] of Object.entries(denials)) expect({ what, status: result.status }).toEqual({ what, status: 403 });
    expect(denials['label another node with its own labels'].message).toMatch(/may change only the node its pod runs on/);
    expect(denials['evict a pod on its own node'].message).toMatch(/cannot create resource "pods\/eviction"/);
    // Nothing changed on the other node or the workload.
    const other = await core.readNode({ name: otherNode });
    expect(other.metadata?.labels?.[keys.driverReady]).toBeUndefined();
    expect(other.spec?.unschedulable).not.toBe(true);
    const still = await core.readNamespacedPod({ name: 'workload', namespace: ns.name });
    expect(still.metadata?.uid).toBe(workload.metadata?.uid);
    expect(still.metadata?.deletionTimestamp).toBeUndefined();
  });
});
