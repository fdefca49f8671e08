import { CoreV1Api, PolicyV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiStatusCode, isNotFound } from '../../../shared/kube/api-error.ts';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { uniqueTestId } from './fixtures.ts';

const kc = sharedCluster().kubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const policy = kc.makeApiClient(PolicyV1Api);
const nodeName = uniqueTestId('evict');
let ns: TestNamespace;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'smoke-evict');
  await createFakeNodes(kc, [{ name: nodeName }]);
});

afterAll(async () => {
  await ns.delete();
  await deleteFakeNodes(kc, [nodeName]);
});

function aPod(name: string, labels: Record<string, string>): V1Pod {
  return {
    metadata: { name, namespace: ns.name, labels },
    spec: { nodeName, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'app', image: 'app' }] },
  };
}

async function runningPod(name: string): Promise<void> {
  await waitUntil(`${name} to run`, async () => {
    const pod = await core.readNamespacedPod({ name, namespace: ns.name });
    return pod.status?.phase === 'Running' ? true : undefined;
  });
}

async function evict(name: string): Promise<number> {
  try {
    await core.createNamespacedPodEviction({ name, namespace: ns.name, body: { metadata: { name, namespace: ns.name } } });
    return 201;
  } catch (error) {
    return apiStatusCode(error) ?? -1;
  }
}

describe('the eviction API with the real disruption controller', () => {
  it('refuses with 429 to evict the only pod a PDB minAvailable: 1 protects', async () => {
    await core.createNamespacedPod({ namespace: ns.name, body: aPod('protected', { app: 'protected' }) });
    await policy.createNamespacedPodDisruptionBudget({
      namespace: ns.name,
      body: { metadata: { name: 'keep-one' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'protected' } } } },
    });
    await runningPod('protected');
    // The disruption controller must have observed the pod before the PDB means anything.
    await waitUntil('the PDB status to count the pod', async () => {
      const pdb = await policy.readNamespacedPodDisruptionBudget({ name: 'keep-one', namespace: ns.name });
      return pdb.status?.currentHealthy === 1 && pdb.status.observedGeneration === pdb.metadata?.generation ? true : undefined;
    });

    expect(await evict('protected')).toBe(429);
    expect((await core.readNamespacedPod({ name: 'protected', namespace: ns.name })).metadata?.deletionTimestamp).toBeUndefined();
  });

  it('evicts an unprotected pod, which then disappears', async () => {
    await core.createNamespacedPod({ namespace: ns.name, body: aPod('free', { app: 'free' }) });
    await runningPod('free');

    expect(await evict('free')).toBe(201);
    await waitUntil('the evicted pod to disappear', async () => {
      try {
        await core.readNamespacedPod({ name: 'free', namespace: ns.name });
        return undefined;
      } catch (error) {
        if (isNotFound(error)) return true;
        throw error;
      }
    });
  });
});
