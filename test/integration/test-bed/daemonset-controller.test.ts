import { AppsV1Api, CoreV1Api, type V1ControllerRevision, type V1DaemonSet, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNoChange } from '../../bed/expect-no-change.ts';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { TEST_NODE_LABEL, uniqueTestId } from './fixtures.ts';

const kc = sharedCluster().kubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const id = uniqueTestId('ds');
const nodeNames = [`${id}-a`, `${id}-b`, `${id}-c`];
let ns: TestNamespace;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'smoke-ds');
  await createFakeNodes(kc, nodeNames.map((name) => ({ name, labels: { [TEST_NODE_LABEL]: id } })));
});

afterAll(async () => {
  await ns.delete();
  await deleteFakeNodes(kc, nodeNames);
});

function driverDaemonSet(image: string): V1DaemonSet {
  return {
    metadata: { name: 'driver', namespace: ns.name },
    spec: {
      selector: { matchLabels: { app: 'driver' } },
      updateStrategy: { type: 'OnDelete' },
      template: {
        metadata: { labels: { app: 'driver' } },
        spec: {
          nodeSelector: { [TEST_NODE_LABEL]: id },
          tolerations: [{ operator: 'Exists' }],
          containers: [{ name: 'driver', image }],
        },
      },
    },
  };
}

async function listPods(): Promise<V1Pod[]> {
  return (await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=driver' })).items;
}

async function newestRevision(): Promise<V1ControllerRevision> {
  const revisions = (await apps.listNamespacedControllerRevision({ namespace: ns.name })).items;
  const newest = revisions.sort((a, b) => b.revision - a.revision)[0];
  if (newest === undefined) throw new Error('no ControllerRevision');
  return newest;
}

describe('the real DaemonSet controller with KWOK nodes', () => {
  it('runs one pod per fake node, each labelled with the newest ControllerRevision hash', async () => {
    await apps.createNamespacedDaemonSet({ namespace: ns.name, body: driverDaemonSet('driver:v1') });

    const pods = await waitUntil('one Running pod per node', async () => {
      const items = await listPods();
      const running = items.filter((p) => p.status?.phase === 'Running');
      return running.length === nodeNames.length ? running : undefined;
    });

    expect(pods.map((p) => p.spec?.nodeName).sort()).toEqual([...nodeNames].sort());
    const hash = (await newestRevision()).metadata?.labels?.['controller-revision-hash'];
    expect(hash).toBeTruthy();
    for (const pod of pods) expect(pod.metadata?.labels?.['controller-revision-hash']).toBe(hash);
  });

  it('creates a new revision on a template change and, with OnDelete, leaves the old pods in place', async () => {
    const before = await newestRevision();
    const podsBefore = await listPods();
    await apps.patchNamespacedDaemonSet(
      { name: 'driver', namespace: ns.name, body: [{ op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'driver:v2' }] },
    );

    const after = await waitUntil('a new ControllerRevision', async () => {
      const newest = await newestRevision();
      return newest.revision > before.revision ? newest : undefined;
    });
    expect(after.metadata?.labels?.['controller-revision-hash']).not.toBe(before.metadata?.labels?.['controller-revision-hash']);

    // The controller must not (wrongly) replace pods: no pod deleted or created for 2 s.
    await expectNoChange<V1Pod>(kc, {
      path: `/api/v1/namespaces/${ns.name}/pods`,
      query: { labelSelector: 'app=driver' },
      list: () => core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=driver' }),
      forMs: 2_000,
      unwanted: (type, pod) => (type !== 'MODIFIED' ? `pod ${type}` : pod.metadata?.deletionTimestamp != null ? 'pod deleted' : undefined),
    });
    const podsAfter = await listPods();
    expect(podsAfter.map((p) => p.metadata?.uid).sort()).toEqual(podsBefore.map((p) => p.metadata?.uid).sort());
    for (const pod of podsAfter) {
      expect(pod.metadata?.labels?.['controller-revision-hash']).toBe(before.metadata?.labels?.['controller-revision-hash']);
    }
  });
});
