import { PolicyV1Api, Watch, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from '../../bed/wait-until.ts';
import { isPodReady, useRolloutWorlds, type RolloutWorld } from './harness.ts';
import { oneNodeWorld } from './one-node-world.ts';

// Pods that use the device, with the DriverRollout's defaults for pod deletion (on, as the GPU
// Operator's gpuPodDeletion, for nvidia.com/gpu*): they leave through the Eviction API before
// the driver pod is replaced, and a PodDisruptionBudget holds.

const worlds = useRolloutWorlds({ beforeAll, afterEach });

/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;

const oneNode = (prefix: string): Promise<{ world: RolloutWorld; node: string }> => oneNodeWorld((p) => worlds.create(p), prefix);

/** When (ms) each pod of the namespace was first seen terminating or gone. */
async function watchDeletions(world: RolloutWorld): Promise<Map<string, number>> {
  const seen = new Map<string, number>();
  const request = await new Watch(world.kc).watch(`/api/v1/namespaces/${world.ns.name}/pods`, {}, (type: string, pod: V1Pod) => {
    const name = pod.metadata?.name ?? '';
    if ((type === 'DELETED' || pod.metadata?.deletionTimestamp != null) && !seen.has(name)) seen.set(name, Date.now());
  }, () => undefined);
  world.onTearDown(() => {
    request.abort();
    return Promise.resolve();
  });
  return seen;
}

describe('device pods, default pod deletion', () => {
  it('evicts a GPU pod before the driver pod is replaced, with no podDeletion block at all', async () => {
    const { world, node } = await oneNode('evict');
    await world.createPod(node, 'trainer', { resources: { 'nvidia.com/gpu': '1' } });
    await world.createPod(node, 'web');
    await world.createRollout({ upgradePolicy: { podDeletion: { force: true } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    const driverBefore = (await world.driverPods())[0]?.metadata?.name ?? '';
    const deletions = await watchDeletions(world);
    await world.bumpDriver('driver:v2');

    await world.waitForDriverPods((pods) => pods.length === 1 && pods[0]?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pods[0]), 60_000);
    await world.waitForStates({ [node]: 'upgrade-done' });
    const trainerGone = deletions.get('trainer');
    const driverGone = deletions.get(driverBefore);
    expect(trainerGone).toBeDefined();
    expect(driverGone).toBeDefined();
    expect(trainerGone ?? Infinity).toBeLessThan(driverGone ?? 0);
    // A pod that does not use the device stays (the drain, disabled by default, would decide).
    expect(deletions.has('web')).toBe(false);
  });

  it('with no upgradePolicy at all, a bare GPU pod (no controller, so not evictable without force) is never run over: upgrade-failed naming it, the driver pod not restarted', async () => {
    const { world, node } = await oneNode('nopolicy');
    await world.createPod(node, 'trainer', { resources: { 'nvidia.com/gpu': '1' } });
    await world.createRollout({});
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    const driverBefore = (await world.driverPods())[0]?.metadata?.uid;
    await world.bumpDriver('driver:v2');

    const [failed] = await world.waitForStates({ [node]: 'upgrade-failed' }, HANG_MS);
    expect(failed?.metadata?.annotations?.[world.keys.upgradeReason]).toMatch(/cannot delete device pods: .*trainer \(not managed by a controller; set podDeletion\.force\); drain is not enabled/);
    expect((await world.driverPods())[0]?.metadata?.uid).toBe(driverBefore);
    const trainer = await world.core.readNamespacedPod({ name: 'trainer', namespace: world.ns.name });
    expect(trainer.metadata?.deletionTimestamp).toBeUndefined();
  });

  it('a PDB refusing the eviction holds until podDeletion.timeoutSeconds, then upgrade-failed naming the PDB; the GPU pod keeps running', async () => {
    const { world, node } = await oneNode('pdbdev');
    await world.createPod(node, 'guarded', { labels: { app: 'guarded' }, resources: { 'nvidia.com/gpu': '1' } });
    await world.kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
      namespace: world.ns.name,
      body: { metadata: { name: 'gpu-guard' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } } },
    });
    await world.createRollout({ upgradePolicy: { podDeletion: { force: true, timeoutSeconds: 3 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    const driverBefore = (await world.driverPods())[0]?.metadata?.uid;
    await world.bumpDriver('driver:v2');

    await world.waitForNodes('the eviction refused by the PDB, named in the reason', (nodes) =>
      /PDB .*gpu-guard/.test((nodes[0] as V1Node).metadata?.annotations?.[world.keys.upgradeReason] ?? '') ? true : undefined, 20_000);
    const [failed] = await world.waitForStates({ [node]: 'upgrade-failed' }, 20_000);
    expect(failed?.metadata?.annotations?.[world.keys.upgradeReason]).toMatch(/^device pods not removed after 3s: PDB .*gpu-guard blocks eviction of .*guarded; drain is not enabled/);
    const guarded = await world.core.readNamespacedPod({ name: 'guarded', namespace: world.ns.name });
    expect(guarded.metadata?.deletionTimestamp).toBeUndefined();
    // The driver was not restarted under the GPU pod.
    expect((await world.driverPods())[0]?.metadata?.uid).toBe(driverBefore);
  });

  it('with drain enabled, a PDB refusing the eviction past podDeletion.timeoutSeconds sends the node to drain-required (Warning naming the PDB), and the drain takes over', async () => {
    const { world, node } = await oneNode('pdbdrain');
    await world.createPod(node, 'guarded', { labels: { app: 'guarded' }, resources: { 'nvidia.com/gpu': '1' } });
    const policy = world.kc.makeApiClient(PolicyV1Api);
    await policy.createNamespacedPodDisruptionBudget({
      namespace: world.ns.name,
      body: { metadata: { name: 'gpu-guard' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } } },
    });
    await world.createRollout({ upgradePolicy: { podDeletion: { force: true, timeoutSeconds: 3 }, drain: { enable: true, force: true, timeoutSeconds: 600 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    const driverBefore = (await world.driverPods())[0]?.metadata?.uid;
    await world.bumpDriver('driver:v2');

    // The drain is refused by the same PDB, so the node stays in drain-required until it goes.
    await world.waitForStates({ [node]: 'drain-required' }, HANG_MS);
    const warnings = await waitUntil('the Warning Event of the fallback', async () => {
      const events = (await world.events(`${world.driver.toUpperCase()}DriverUpgrade`)).filter((e) => e.object === node && e.type === 'Warning' && e.message.includes('draining the node instead'));
      return events.length > 0 ? events : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    expect(warnings[0]?.message).toMatch(/^device pods not removed after 3s: PDB .*gpu-guard blocks eviction of .*guarded.*; draining the node instead$/);
    expect((await world.driverPods())[0]?.metadata?.uid).toBe(driverBefore);

    await policy.deleteNamespacedPodDisruptionBudget({ name: 'gpu-guard', namespace: world.ns.name });
    await world.waitForDriverPods((pods) => pods.length === 1 && pods[0]?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pods[0]), HANG_MS);
    await world.waitForStates({ [node]: 'upgrade-done' }, HANG_MS);
    expect((await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=guarded' })).items).toEqual([]);
  });
});
