import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { AppsV1Api, CoreV1Api, type V1DaemonSet, type V1Pod } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driverKeys } from '../../../shared/keys.ts';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { aGpuNode } from '../../fixtures/sysfs/sysfs-tree.ts';
import { installedHeadersKernel } from '../../unit/agent/build/sample-driver.ts';
import { TEST_NODE_LABEL, uniqueTestId } from '../test-bed/fixtures.ts';
import { writeSampleDriverSource } from '../../unit/agent/agent-fixtures.ts';
import { AGENT_TEST_TIMEOUT_MS, FIRST_LOAD_HANG_MS, startAgentProcess } from './agent-process.ts';

// The shipped DaemonSet, applied as is (namespace and a test nodeSelector aside) to the real
// API server and DaemonSet controller; KWOK plays the kubelet and honours readiness gates. The
// agent runs here as a child process with the pod's environment from the manifest, standing in
// for the container KWOK does not run; host paths point into a temporary directory and the
// kernel is the simulated one.

const cluster = sharedCluster();
const kc = cluster.kubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const id = uniqueTestId('agent-ds');
const nodeName = `${id}-gpu`;
const keys = driverKeys('gpu', 'nvidia.com');
let ns: TestNamespace;
let work: string;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'agent-ds');
  await core.createNamespacedServiceAccount({ namespace: ns.name, body: { metadata: { name: 'driver-rollout-driver' } } });
  await createFakeNodes(kc, [{ name: nodeName, labels: { [TEST_NODE_LABEL]: id } }]);
  work = await mkdtemp(join(tmpdir(), 'agent-ds-'));
});

afterAll(async () => {
  await ns.delete();
  await deleteFakeNodes(kc, [nodeName]);
  await rm(work, { recursive: true, force: true });
});

async function driverPod(): Promise<V1Pod> {
  return await waitUntil('the driver pod to run on the node', async () => {
    const pods = (await core.listNamespacedPod({ namespace: ns.name, fieldSelector: `spec.nodeName=${nodeName}` })).items;
    return pods.find((p) => p.status?.phase === 'Running');
  });
}

function podReady(pod: V1Pod): string | undefined {
  return pod.status?.conditions?.find((c) => c.type === 'Ready')?.status;
}

/** The agent container's environment as the kubelet would resolve it for `pod`. */
function agentEnv(ds: V1DaemonSet, pod: V1Pod): Record<string, string> {
  const fields: Record<string, string> = {
    'spec.nodeName': pod.spec?.nodeName ?? '',
    'metadata.name': pod.metadata?.name ?? '',
    'metadata.namespace': pod.metadata?.namespace ?? '',
  };
  const container = ds.spec?.template.spec?.containers.find((c) => c.name === 'agent');
  return Object.fromEntries((container?.env ?? []).map((e) => [e.name, e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath ?? ''] ?? '']));
}

describe('manifests/driver-daemonset.yaml on the real API server', () => {
  it('its pod is Ready only once the agent reports the driver loaded, and no longer after SIGTERM', async () => {
    const ds = parse(await readFile(resolve(import.meta.dirname, '../../../manifests/driver-daemonset.yaml'), 'utf8')) as V1DaemonSet;
    ds.metadata = Object.assign(ds.metadata ?? {}, { namespace: ns.name });
    const podSpec = ds.spec?.template.spec;
    if (podSpec === undefined) throw new Error('manifest has no pod spec');
    podSpec.nodeSelector = { ...podSpec.nodeSelector, [TEST_NODE_LABEL]: id };
    await apps.createNamespacedDaemonSet({ namespace: ns.name, body: ds });

    const pod = await driverPod();
    expect(pod.spec?.readinessGates).toEqual([{ conditionType: keys.driverReadyCondition }]);
    expect(podReady(pod)).toBe('False');

    const host = join(work, 'host');
    const env = {
      ...agentEnv(ds, pod),
      // Host paths of the manifest, moved into the test's directory; the real kernel swapped for the simulated one.
      SYSFS_ROOT: await aGpuNode().writeTo(join(host, 'sys')),
      MODULE_ROOT: host,
      MODPROBE_CONFIG_DIR: join(host, 'run', 'modprobe.d'),
      CACHE_DIR: join(host, 'var', 'lib', 'driver-rollout', 'cache'),
      READY_FILE: join(host, 'run', 'driver-rollout', 'gpu', '.driver-ready'),
      LOCK_PATH: join(host, 'run', 'driver-rollout', 'gpu', 'agent.lock'),
      HEADERS_DIRS: '/usr/src/linux-headers-{kernel}',
      KERNEL_VERSION: installedHeadersKernel(),
      // The sample driver stands in for NVIDIA's sources and modules.
      DRIVER_SOURCE_DIR: await writeSampleDriverSource(join(work, 'src'), '570.86.15'),
      DRIVER_MODULES: 'drsample_net',
      // The manifest's NVIDIA load plan preloads i2c_core and ipmi from the host: the sample
      // driver needs none of it. Firmware paths move into the test's directory like the rest.
      LOAD_PLAN: 'generic',
      FIRMWARE_HOST_DIR: join(host, 'var', 'lib', 'driver-rollout', 'gpu', 'firmware'),
      HOST_FIRMWARE_ROOTS: join(host, 'lib', 'firmware'),
      MODULE_PARAMETERS: '',
      KERNEL_ADAPTER: 'simulated',
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      KUBECONFIG: cluster.kubeconfigPath,
    };
    const agent = startAgentProcess(env);
    try {
      const ready = await waitUntil('the driver pod to become Ready', async () => {
        const p = await core.readNamespacedPod({ name: pod.metadata?.name ?? '', namespace: ns.name });
        return podReady(p) === 'True' ? p : undefined;
      }, { timeoutMs: FIRST_LOAD_HANG_MS, intervalMs: 200 });
      expect(ready.status?.conditions?.find((c) => c.type === keys.driverReadyCondition)).toMatchObject({ status: 'True', reason: 'Loaded' });
      const labels = (await core.readNode({ name: nodeName })).metadata?.labels ?? {};
      expect(labels).toMatchObject({
        'driver-rollout.io/gpu.present': 'true',
        'driver-rollout.io/gpu.count': '8',
        'driver-rollout.io/gpu-driver.version': '570.86.15',
        'driver-rollout.io/gpu-driver.ready': 'true',
      });
      // NFD, GFD and the GPU Operator own these; the agent never writes them.
      expect(labels).not.toHaveProperty(['nvidia.com/gpu.present']);
      expect(labels).not.toHaveProperty(['nvidia.com/gpu.count']);

      agent.signal('SIGTERM');
      await waitUntil('the driver pod to turn not Ready', async () => {
        const p = await core.readNamespacedPod({ name: pod.metadata?.name ?? '', namespace: ns.name });
        return podReady(p) === 'False' ? p : undefined;
      }, { timeoutMs: 10_000, intervalMs: 100 });
      expect(await agent.exited).toBe(0);
    } finally {
      if (!agent.hasExited()) agent.signal('SIGKILL');
      await agent.exited;
    }
  }, AGENT_TEST_TIMEOUT_MS);
});
