import type { V1DaemonSet } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { driverFingerprint, renderLoadedDriver } from '../../../shared/driver-identity.ts';
import { driverKeys, upgradeEventReason } from '../../../shared/keys.ts';
import { keepWatching } from '../../bed/keep-watching.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { asGpuDaemonSet, isPodReady, useRolloutWorlds } from './harness.ts';

const worlds = useRolloutWorlds({ beforeAll, afterEach });
/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;
/** What the gpu agent of the first revision loaded, as it publishes it. */
const GPU_V1 = driverFingerprint({ version: '1', modules: ['gpu'], loadPlan: 'gpu', loadOptional: [], parameters: {} });

/**
 * Two rollouts changed at once on shared nodes, one coordinator: the world's driver (the NIC
 * driver, "ofed") and a second driver that loads after it ("gpu", `loadsAfter: [<ofed>]`), paused. The
 * driver pods are plain KWOK pods; the test plays the parts of the real agents and init
 * containers that the order rests on, as they write them: the gpu agent's loaded-driver
 * annotation, removed when its pod is deleted (it unloads on stop), and the gpu init container's
 * safe-load request, which holds its new driver until the coordinator releases it.
 */
describe('drivers that share a node go in order (loadsAfter), two rollouts on the real control plane', () => {
  it('gpu, paused, is stopped by ofed\'s restart before ofed reloads, and loads only after ofed has, on its new revision', async () => {
    const world = worlds.create('order');
    await world.setUp([{}, {}]);
    const gpu = `g${randomBytes(4).toString('hex')}`;
    const gpuKeys = driverKeys(gpu);
    const ofedKeys = world.keys;
    await world.createDriver('ofed:v1');
    const gpuSet: V1DaemonSet = asGpuDaemonSet(world.daemonSetBody('gpu:v1'));
    await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: gpuSet });
    await waitUntil('gpu driver pods Ready', async () => {
      const pods = (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=gpu-driver' })).items;
      return pods.length === world.nodeNames.length && pods.every(isPodReady) ? true : undefined;
    }, { timeoutMs: HANG_MS });
    // As the gpu agent writes it once its driver is loaded: its own pod, and what it loaded.
    const gpuPods = (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=gpu-driver' })).items;
    for (const name of world.nodeNames) {
      const pod = gpuPods.find((p) => p.spec?.nodeName === name)?.metadata?.name ?? '';
      await world.core.patchNode({ name, body: { metadata: { annotations: { [gpuKeys.driverLoaded]: renderLoadedDriver({ pod: `${world.ns.name}/${pod}`, fingerprint: GPU_V1 }) } } } }, MERGE_PATCH);
    }
    const policy = { maxParallelUpgrades: 0, maxUnavailable: '100%', podDeletion: { enable: false } } as const;
    await world.createRollout({ upgradePolicy: policy });
    // gpu paused throughout: its change alone would start nothing, and ofed's restart must still
    // stop it first, and bring it back after ofed, instead of waiting under it until the timeout.
    await world.createRollout({ driverName: gpu, selector: { matchLabels: { app: 'gpu-driver' } }, loadsAfter: [world.driver], upgradePolicy: { ...policy, autoUpgrade: false } }, 'gpu');
    await world.startCoordinator();
    await world.waitForNodes('both drivers upgrade-done', (nodes) =>
      nodes.length === world.nodeNames.length && nodes.every((n) => n.metadata?.labels?.[ofedKeys.upgradeState] === 'upgrade-done' && n.metadata.labels[gpuKeys.upgradeState] === 'upgrade-done') ? true : undefined, HANG_MS);

    // Per node, in the order seen: the drivers stopped, replaced, loaded and let load.
    const seen = new Map<string, string[]>();
    const note = (node: string, what: string): void => {
      const list = seen.get(node) ?? [];
      if (!list.includes(what)) list.push(what);
      seen.set(node, list);
    };
    const has = (node: string, what: string): boolean => (seen.get(node) ?? []).includes(what);
    // The gpu agent's part: its pod deleted → it unloads on stop, removing its loaded-driver annotation.
    const stopPods = keepWatching(world.kc, `/api/v1/namespaces/${world.ns.name}/pods`, {}, (type, pod) => {
      const node = pod.spec?.nodeName;
      if (node === undefined || (type !== 'DELETED' && pod.metadata?.deletionTimestamp == null)) return;
      if (pod.metadata?.labels?.app === 'gpu-driver') {
        note(node, 'gpu stopped');
        void world.core.patchNode({ name: node, body: { metadata: { annotations: { [gpuKeys.driverLoaded]: null } } } }, MERGE_PATCH);
      }
      if (pod.metadata?.labels?.app === 'driver') note(node, 'ofed replaced');
    });
    world.onTearDown(() => {
      stopPods();
      return Promise.resolve();
    });
    await stopPods.opened;
    // Each node's states as the watch last saw them: the order is judged once the watch has seen the end.
    const latest = new Map<string, string>();
    const watch = await world.watchNodes((nodes) => {
      for (const n of nodes.values()) {
        const name = n.metadata?.name ?? '';
        latest.set(name, `${world.stateOf(n)} ${n.metadata?.labels?.[gpuKeys.upgradeState] ?? ''}`);
        if (has(name, 'ofed replaced') && ['validation-required', 'uncordon-required', 'upgrade-done'].includes(world.stateOf(n))) note(name, 'ofed loaded');
        // Seen asked, then seen released (an event from before the request must not count as released).
        if (has(name, 'gpu asked') && n.metadata?.annotations?.[gpuKeys.waitForSafeLoad] !== undefined) note(name, 'gpu at the gate');
        if (has(name, 'gpu at the gate') && n.metadata?.annotations?.[gpuKeys.waitForSafeLoad] === undefined) note(name, 'gpu released');
      }
      return undefined;
    });
    // The gpu init container's part: its new driver asks for a safe load before it would load. KWOK
    // runs a new pod at once, where the real one stays Pending at its init container until it has
    // asked: so the request is made here before anything changes, the old pod still loaded.
    for (const name of world.nodeNames) {
      await world.core.patchNode({ name, body: { metadata: { annotations: { [gpuKeys.waitForSafeLoad]: 'true' } } } }, MERGE_PATCH);
      note(name, 'gpu asked');
    }
    // Both rollouts changed at once, ofed's change first.
    await world.bumpDriver('ofed:v2');
    await world.apps.patchNamespacedDaemonSet({ name: 'gpu', namespace: world.ns.name, body: { spec: { template: { spec: { containers: [{ name: 'driver', image: 'gpu:v2' }] } } } } }, MERGE_PATCH);

    await world.waitForNodes('both drivers upgrade-done at the new revisions, uncordoned', (nodes) =>
      nodes.length === world.nodeNames.length && nodes.every((n) => n.metadata?.labels?.[ofedKeys.upgradeState] === 'upgrade-done' && n.metadata.labels[gpuKeys.upgradeState] === 'upgrade-done' && n.spec?.unschedulable !== true) ? true : undefined, HANG_MS)
      .catch(async (error: unknown) => {
        const nodes = (await world.core.listNode()).items.filter((n) => world.nodeNames.includes(n.metadata?.name ?? ''));
        const states = nodes.map((n) => `${n.metadata?.name}: ofed ${world.stateOf(n)} (${n.metadata?.annotations?.[ofedKeys.upgradeReason] ?? ''}), gpu ${n.metadata?.labels?.[gpuKeys.upgradeState]} (${n.metadata?.annotations?.[gpuKeys.upgradeReason] ?? ''})`);
        throw new Error(`order seen: ${JSON.stringify(Object.fromEntries(seen))}; ${states.join('; ')}`, { cause: error });
      });
    // The release may come in the same patch as upgrade-done (nothing else to wait for), which the poll above can see first.
    await waitUntil('the watch has seen both drivers upgrade-done on every node', () => Promise.resolve(world.nodeNames.every((n) => latest.get(n) === 'upgrade-done upgrade-done') ? true : undefined), { timeoutMs: 30_000, intervalMs: 100 });
    watch.stop();
    const images = (await world.core.listNamespacedPod({ namespace: world.ns.name })).items.filter(isPodReady).map((p) => p.spec?.containers[0]?.image).sort();
    expect(images).toEqual([...world.nodeNames.map(() => 'gpu:v2'), ...world.nodeNames.map(() => 'ofed:v2')]);
    for (const name of world.nodeNames) {
      // gpu stops before ofed is replaced; ofed loads before gpu is let load.
      expect((seen.get(name) ?? []).filter((w) => w !== 'gpu asked' && w !== 'gpu at the gate'), `${name}: ${JSON.stringify(Object.fromEntries(seen))}; ${JSON.stringify((await world.events(upgradeEventReason(gpu))).filter((e) => e.object === name).map((e) => e.message))}`).toEqual(['gpu stopped', 'ofed replaced', 'ofed loaded', 'gpu released']);
    }
    // gpu's own Events say who stopped it and why, then its flow from its restart to upgrade-done.
    const gpuEvents = await world.events(upgradeEventReason(gpu));
    for (const name of world.nodeNames) {
      const messages = gpuEvents.filter((e) => e.object === name).map((e) => e.message);
      expect(messages.some((m) => m.startsWith('stopping driver pod ') && m.includes(`${world.driver}'s driver restarts on the node and ${gpu} loads after it`)), `${name}: ${JSON.stringify(messages)}`).toBe(true);
      expect(messages.some((m) => m.startsWith('Successfully updated node state label to [upgrade-done]')), name).toBe(true);
    }
  }, 4 * HANG_MS);
});
