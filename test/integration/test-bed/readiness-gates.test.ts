import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STRATEGIC_MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { expectNoChange } from '../../bed/expect-no-change.ts';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { uniqueTestId } from './fixtures.ts';

const GATE = 'example.com/driver-ready';
const kc = sharedCluster().kubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const nodeName = uniqueTestId('gates');
let ns: TestNamespace;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'smoke-gates');
  await createFakeNodes(kc, [{ name: nodeName }]);
});

afterAll(async () => {
  await ns.delete();
  await deleteFakeNodes(kc, [nodeName]);
});

function condition(pod: V1Pod, type: string): string | undefined {
  return pod.status?.conditions?.find((c) => c.type === type)?.status;
}

async function waitForReady(name: string, want: 'True' | 'False'): Promise<V1Pod> {
  return await waitUntil(`pod ${name} Ready=${want}`, async () => {
    const pod = await core.readNamespacedPod({ name, namespace: ns.name });
    return condition(pod, 'Ready') === want ? pod : undefined;
  });
}

async function setGate(name: string, status: 'True' | 'False'): Promise<void> {
  await core.patchNamespacedPodStatus({
    name,
    namespace: ns.name,
    body: { status: { conditions: [{ type: GATE, status, reason: 'Test', lastTransitionTime: new Date() }] } },
  }, STRATEGIC_MERGE_PATCH);
}

describe('pods on KWOK nodes, like a kubelet', () => {
  it('are Ready at once when they declare no readiness gate', async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: { metadata: { name: 'plain' }, spec: { nodeName, containers: [{ name: 'c', image: 'c' }] } },
    });
    const pod = await waitForReady('plain', 'True');
    expect(pod.status?.phase).toBe('Running');
  });

  it('are Ready only while every readiness gate condition is True', async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: { name: 'gated' },
        spec: { nodeName, readinessGates: [{ conditionType: GATE }], containers: [{ name: 'c', image: 'c' }] },
      },
    });
    await waitUntil('gated pod to run', async () => {
      const pod = await core.readNamespacedPod({ name: 'gated', namespace: ns.name });
      return pod.status?.phase === 'Running' ? pod : undefined;
    });
    expect(condition(await core.readNamespacedPod({ name: 'gated', namespace: ns.name }), 'Ready')).toBe('False');
    await expectNoChange<V1Pod>(kc, {
      path: `/api/v1/namespaces/${ns.name}/pods`,
      query: { fieldSelector: 'metadata.name=gated' },
      list: () => core.listNamespacedPod({ namespace: ns.name, fieldSelector: 'metadata.name=gated' }),
      forMs: 1_000,
      unwanted: (_type, pod) => (condition(pod, 'Ready') === 'True' ? 'Ready while its gate is not True' : undefined),
    });

    await setGate('gated', 'True');
    const ready = await waitForReady('gated', 'True');
    expect(condition(ready, GATE)).toBe('True');

    await setGate('gated', 'False');
    const unready = await waitForReady('gated', 'False');
    expect(condition(unready, GATE)).toBe('False');
  });
});
