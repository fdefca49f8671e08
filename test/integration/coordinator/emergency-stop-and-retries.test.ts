import { PolicyV1Api, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DRIVER_ROLLOUT_GROUP, DRIVER_ROLLOUT_PLURAL, DRIVER_ROLLOUT_VERSION } from '../../../coordinator/policy/driver-rollout-spec.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { expectNoChange } from '../../bed/expect-no-change.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { isPodReady, useRolloutWorlds, type RolloutWorld } from './harness.ts';
import { oneNodeWorld } from './one-node-world.ts';

// Issue 11's emergency stop and remaining state-machine gaps, each on the real control plane
// (KWOK driver pods, the coordinator in this process).

const worlds = useRolloutWorlds({ beforeAll, afterEach });

/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;

const oneNode = (prefix: string): Promise<{ world: RolloutWorld; node: string }> => oneNodeWorld((p) => worlds.create(p), prefix);

/** A bare workload pod on `node` and a PodDisruptionBudget that refuses its eviction. */
async function guardedWorkload(world: RolloutWorld, node: string): Promise<PolicyV1Api> {
  const policy = world.kc.makeApiClient(PolicyV1Api);
  await world.createPod(node, 'guarded', { labels: { app: 'guarded' } });
  await policy.createNamespacedPodDisruptionBudget({
    namespace: world.ns.name,
    body: { metadata: { name: 'guard' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } } },
  });
  return policy;
}

async function patchPolicy(world: RolloutWorld, upgradePolicy: Record<string, unknown>): Promise<void> {
  await world.custom.patchNamespacedCustomObject(
    { group: DRIVER_ROLLOUT_GROUP, version: DRIVER_ROLLOUT_VERSION, plural: DRIVER_ROLLOUT_PLURAL, namespace: world.ns.name, name: 'driver', body: { spec: { upgradePolicy } } },
    MERGE_PATCH,
  );
}

const annotation = (n: V1Node | undefined, key: string): string | undefined => n?.metadata?.annotations?.[key];

async function currentAndReady(world: RolloutWorld, image: string): Promise<boolean> {
  const [pod] = await world.driverPods();
  return pod?.spec?.containers[0]?.image === image && isPodReady(pod);
}

describe('emergency stop and the remaining state-machine gaps, real control plane', () => {
  it('upgradePolicy.stop freezes a draining node (reason stopped, nothing evicted even once the PDB is gone); clearing it resumes to upgrade-done', async () => {
    const { world, node } = await oneNode('stop');
    const policy = await guardedWorkload(world, node);
    await world.createRollout({ upgradePolicy: { podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 600 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    await world.bumpDriver('driver:v2');
    await world.waitForNodes('the drain blocked by the PDB', (nodes) =>
      world.stateOf(nodes[0] ?? {}) === 'drain-required' && (annotation(nodes[0], world.keys.upgradeReason) ?? '').includes('guard') ? true : undefined, HANG_MS);

    await patchPolicy(world, { stop: true });
    const [stopped] = await world.waitForNodes('the node stopped where it was', (nodes) =>
      world.stateOf(nodes[0] ?? {}) === 'drain-required' && (annotation(nodes[0], world.keys.upgradeReason) ?? '').startsWith('stopped') ? nodes : undefined, HANG_MS);
    expect(stopped?.spec?.unschedulable).toBe(true);
    const status = await world.waitForStatus('stopped', (s) => s.stopped === true, HANG_MS);
    expect((status.conditions as { type: string; status: string }[]).find((c) => c.type === 'Stopped')?.status).toBe('True');

    // The PDB goes: a running drain would evict the pod at its next retry (every 5 s). Stopped,
    // nothing is evicted over three retries' time.
    await policy.deleteNamespacedPodDisruptionBudget({ name: 'guard', namespace: world.ns.name });
    await expectNoChange<V1Pod>(world.kc, {
      path: `/api/v1/namespaces/${world.ns.name}/pods`,
      query: { labelSelector: 'app=guarded' },
      list: () => world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=guarded' }),
      forMs: 15_000,
      unwanted: (type, pod) => (type === 'DELETED' || pod.metadata?.deletionTimestamp != null ? 'evicted while stopped' : undefined),
    });
    const guarded = (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=guarded' })).items;
    expect(guarded.map((p) => [p.metadata?.name, p.metadata?.deletionTimestamp ?? null])).toEqual([['guarded', null]]);
    expect(world.stateOf((await world.nodes())[0] ?? {})).toBe('drain-required');

    await patchPolicy(world, { stop: false });
    await world.waitForNodes('upgrade-done after the stop is cleared', (nodes) => (world.stateOf(nodes[0] ?? {}) === 'upgrade-done' ? true : undefined), HANG_MS);
    expect(await currentAndReady(world, 'driver:v2')).toBe(true);
    expect((await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=guarded' })).items).toEqual([]);
  });

  it('validation-required clears a safe-load annotation set again meanwhile (a restarted driver pod), and the node keeps validating', async () => {
    const { world, node } = await oneNode('revalid');
    // A validator that never turns Ready: its readiness gate is never set, so the node stays in validation-required.
    await world.core.createNamespacedPod({
      namespace: world.ns.name,
      body: {
        metadata: { name: 'validator', labels: { app: 'validator' } },
        spec: { nodeName: node, tolerations: [{ operator: 'Exists' }], readinessGates: [{ conditionType: 'example.com/validated' }], containers: [{ name: 'validate', image: 'validator:v1' }] },
      },
    });
    await world.createRollout({ upgradePolicy: { podDeletion: { enable: false }, validation: { podSelector: 'app=validator', timeoutSeconds: 600 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    await world.bumpDriver('driver:v2');
    await world.waitForStates({ [node]: 'validation-required' }, HANG_MS);

    // What a restarted driver pod's init container does: set the annotation again and block.
    await world.core.patchNode({ name: node, body: { metadata: { annotations: { [world.keys.waitForSafeLoad]: 'true' } } } }, MERGE_PATCH);
    const [cleared] = await world.waitForNodes('the re-set annotation cleared', (nodes) =>
      annotation(nodes[0], world.keys.waitForSafeLoad) === undefined ? nodes : undefined, HANG_MS);
    expect(world.stateOf(cleared ?? {})).toBe('validation-required');
    expect(cleared?.spec?.unschedulable).toBe(true);
  });

  it('an upgrade-failed node whose driver pod is out of date is retried by itself when a newer driver revision is pushed, and completes', async () => {
    const { world, node } = await oneNode('autoretry');
    const policy = await guardedWorkload(world, node);
    await world.createRollout({ maxFailedNodes: 1, upgradePolicy: { podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 2 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    await world.bumpDriver('driver:v2');
    const [failed] = await world.waitForStates({ [node]: 'upgrade-failed' }, HANG_MS);
    const failedAt = annotation(failed, world.keys.failedRevision);
    expect(failedAt).toBeDefined();
    expect(await currentAndReady(world, 'driver:v1')).toBe(true);

    // The cause is fixed and a fixed driver is pushed; nobody relabels the node.
    await policy.deleteNamespacedPodDisruptionBudget({ name: 'guard', namespace: world.ns.name });
    await world.bumpDriver('driver:v3');
    const done = await waitUntil('the node retried by itself and done at v3', async () => {
      const [n] = await world.nodes();
      return world.stateOf(n ?? {}) === 'upgrade-done' && (await currentAndReady(world, 'driver:v3')) ? n : undefined;
    }, { timeoutMs: HANG_MS, intervalMs: 200 });
    expect(annotation(done, world.keys.failedRevision)).toBeUndefined();
    expect(done.spec?.unschedulable).not.toBe(true);
    const retries = await waitUntil('the retry’s Warning Event', async () => {
      const events = (await world.events(`${world.driver.toUpperCase()}DriverUpgrade`)).filter((e) => e.object === node && e.type === 'Warning' && e.message.startsWith('retrying'));
      return events.length > 0 ? events : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    expect(retries.map((e) => e.message)).toEqual([expect.stringContaining(`failed at ${failedAt ?? ''}`)]);
  });
});
