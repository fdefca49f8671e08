import type { V1DaemonSet } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { driverKeys } from '../../../shared/keys.ts';
import { keepWatching } from '../../bed/keep-watching.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { asGpuDaemonSet, isPodReady, useRolloutWorlds } from './harness.ts';

const worlds = useRolloutWorlds({ beforeAll, afterEach });
/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;

/**
 * Two rollouts changed at once on shared nodes, one coordinator: the world's driver (the NIC
 * driver, "ofed") and a second driver that loads after it ("gpu", `loadsAfter: [<ofed>]`). The
 * driver pods are plain KWOK pods; the test plays the parts of the real agents and init
 * containers that the order rests on, as they write them: the gpu agent's loaded-driver
 * annotation, removed when its pod is deleted (it unloads on stop), and the gpu init container's
 * safe-load request, which holds its new driver until the coordinator releases it.
 */
describe('drivers that share a node go in order (loadsAfter), two rollouts on the real control plane', () => {
  it('gpu is stopped before ofed reloads, and loads only after ofed has', async () => {
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
    // As the gpu agent writes it once its driver is loaded.
    for (const name of world.nodeNames) {
      await world.core.patchNode({ name, body: { metadata: { annotations: { [gpuKeys.driverLoaded]: JSON.stringify({ pod: `${world.ns.name}/gpu`, driver: { version: '1' } }) } } } }, MERGE_PATCH);
    }
    const policy = { maxParallelUpgrades: 0, maxUnavailable: '100%', podDeletion: { enable: false } } as const;
    await world.createRollout({ upgradePolicy: policy });
    // gpu paused at first, so that ofed reaches its restart while gpu has not stopped yet.
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
    const watch = await world.watchNodes((nodes) => {
      for (const n of nodes.values()) {
        const name = n.metadata?.name ?? '';
        if (has(name, 'ofed replaced') && ['validation-required', 'uncordon-required', 'upgrade-done'].includes(world.stateOf(n))) note(name, 'ofed loaded');
        if (has(name, 'gpu asked') && n.metadata?.annotations?.[gpuKeys.waitForSafeLoad] === undefined) note(name, 'gpu released');
      }
      return undefined;
    });
    // The gpu init container's part: its new driver asks for a safe load before it would load.
    for (const name of world.nodeNames) {
      await world.core.patchNode({ name, body: { metadata: { annotations: { [gpuKeys.waitForSafeLoad]: 'true' } } } }, MERGE_PATCH);
      note(name, 'gpu asked');
    }
    // Both rollouts changed at once.
    await world.bumpDriver('ofed:v2');
    await world.apps.patchNamespacedDaemonSet({ name: 'gpu', namespace: world.ns.name, body: { spec: { template: { spec: { containers: [{ name: 'driver', image: 'gpu:v2' }] } } } } }, MERGE_PATCH);

    // ofed reaches its restart and waits for gpu (upgrading, still loaded) to stop first.
    const held = await world.waitForNodes('ofed held for gpu', (nodes) => {
      const reasons = nodes.map((n) => n.metadata?.annotations?.[ofedKeys.upgradeReason] ?? '');
      return nodes.length === world.nodeNames.length && reasons.every((r) => r.includes(`waiting for ${gpu} (upgrade-required) to stop first: it loads after ${world.driver}`)) ? nodes : undefined;
    }, HANG_MS);
    expect(held.map((n) => world.stateOf(n))).toEqual(world.nodeNames.map(() => 'pod-restart-required'));
    expect(world.nodeNames.filter((n) => has(n, 'ofed replaced'))).toEqual([]);
    await world.custom.patchNamespacedCustomObject(
      { group: 'driverrollout.io', version: 'v1alpha1', plural: 'driverrollouts', namespace: world.ns.name, name: 'gpu', body: { spec: { upgradePolicy: { autoUpgrade: true } } } },
      MERGE_PATCH,
    );
    await world.waitForNodes('both drivers upgrade-done at the new revisions, uncordoned', (nodes) =>
      nodes.length === world.nodeNames.length && nodes.every((n) => n.metadata?.labels?.[ofedKeys.upgradeState] === 'upgrade-done' && n.metadata.labels[gpuKeys.upgradeState] === 'upgrade-done' && n.spec?.unschedulable !== true) ? true : undefined, HANG_MS)
      .catch((error: unknown) => {
        throw new Error(`order seen: ${JSON.stringify(Object.fromEntries(seen))}`, { cause: error });
      });
    watch.stop();
    const images = (await world.core.listNamespacedPod({ namespace: world.ns.name })).items.filter(isPodReady).map((p) => p.spec?.containers[0]?.image).sort();
    expect(images).toEqual([...world.nodeNames.map(() => 'gpu:v2'), ...world.nodeNames.map(() => 'ofed:v2')]);
    for (const name of world.nodeNames) {
      const order = (seen.get(name) ?? []).filter((w) => w !== 'gpu asked');
      // gpu stops before ofed is replaced; ofed loads before gpu is let load.
      expect(order, name).toEqual(['gpu stopped', 'ofed replaced', 'ofed loaded', 'gpu released']);
    }
  }, 4 * HANG_MS);
});
