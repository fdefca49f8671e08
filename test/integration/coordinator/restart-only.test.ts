import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { V1DaemonSet, V1Node, V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseLoadedDriver } from '../../../shared/driver-identity.ts';
import { upgradeEventReason } from '../../../shared/keys.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { expectNoChange } from '../../bed/expect-no-change.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { AGENT_TEST_LEASE, AgentDriver } from './agent-driver.ts';
import { isPodReady, TEST_NODE_LABEL, useRolloutWorlds, type RolloutWorld } from './harness.ts';

// The restart-only path on the real control plane, with the real agent on every node (process
// kubelet, simulated kernel kept across pod restarts) and the real coordinator: the agents publish
// what they loaded (driver-rollout.io/<driver>-driver-loaded), the coordinator compares it with
// the new template. An image-only change of the agent restarts the driver pods without a cordon
// or an eviction and the agents take their fast path; a driver pod deleted by hand comes back on
// the fast path too, the node untouched; a version change still takes the full path. Slow: kbuild
// of 1.0.0 and 2.0.0 on the shared 2-core machine (18 min at load ~20, 3 of them the image-only step).

const worlds = useRolloutWorlds({ beforeAll, afterEach });

/** States only the full path passes through (restart only goes upgrade-required → pod-restart-required → upgrade-done). */
const FULL_PATH_STATES = new Set(['cordon-required', 'wait-for-jobs-required', 'pod-deletion-required', 'drain-required', 'uncordon-required']);

const podRef = (p: V1Pod): string => `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`;

/** Two GPU nodes running driver 1.0.0 through the real agent, a GPU pod on each, the coordinator, every node upgrade-done. */
async function twoNodesAt1(world: RolloutWorld): Promise<{ agents: AgentDriver; v1: V1DaemonSet; ready: (what: string, check: (images: string[]) => boolean) => Promise<void> }> {
  await world.setUp([{}, {}]);
  const [first, second] = world.nodeNames as [string, string];
  const agents = await AgentDriver.start(world);
  // The second node joins once 1.0.0 is built: it loads from the agents' shared build cache
  // instead of running a second kbuild at the same time.
  const selectNode = (name: string, value: string) => world.core.patchNode({ name, body: { metadata: { labels: { [TEST_NODE_LABEL]: value } } } }, MERGE_PATCH);
  await selectNode(second, `${world.id}-later`);
  const v1 = agents.daemonSet('1.0.0', await agents.source('1.0.0'));
  await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: v1 });
  const ready = async (what: string, check: (images: string[]) => boolean): Promise<void> => {
    await world.waitForDriverPods((pods) => pods.every(isPodReady) && check(pods.map((p) => p.spec?.containers[0]?.image ?? '')), 600_000).catch(async (error: unknown) => {
      throw new Error(`${what} never Ready; agent logs:\n${await agents.logs()}`, { cause: error });
    });
  };
  await ready('driver 1.0.0 on the first node', (images) => images.length === 1);
  await selectNode(second, world.id);
  await ready('driver 1.0.0 on both nodes', (images) => images.length === 2);
  for (const node of world.nodeNames) await world.createPod(node, `train-${node}`, { resources: { 'nvidia.com/gpu': '1' } });
  // The full path would evict these unmanaged GPU pods (force) before restarting the driver.
  await world.createRollout({ upgradePolicy: { maxParallelUpgrades: 1, podDeletion: { force: true } } });
  await world.startCoordinator(AGENT_TEST_LEASE);
  await world.waitForStates({ [first]: 'upgrade-done', [second]: 'upgrade-done' });
  return { agents, v1, ready };
}

/** Runs `change` while watching the test's nodes: any cordon or full-path state fails at once. */
async function withoutCordon(world: RolloutWorld, change: () => Promise<void>): Promise<void> {
  const selector = { labelSelector: `${TEST_NODE_LABEL}=${world.id}` };
  await expectNoChange<V1Node>(world.kc, {
    path: '/api/v1/nodes',
    query: selector,
    list: () => world.core.listNode(selector),
    forMs: 600_000,
    unwanted: (_type, node) => {
      if (node.spec?.unschedulable === true) return 'cordoned';
      const state = world.stateOf(node);
      return FULL_PATH_STATES.has(state) ? `took the full path (${state})` : undefined;
    },
    until: change,
  });
}

/** Every node's loaded-driver annotation names a pod other than `before` had on it (the new agent published). */
async function waitForNewPublishers(world: RolloutWorld, before: ReadonlyMap<string, string>): Promise<V1Node[]> {
  return world.waitForNodes('the new agents to publish what is loaded', (nodes) =>
    nodes.every((n) => {
      const loaded = parseLoadedDriver(n.metadata?.annotations?.[world.keys.driverLoaded]);
      return loaded !== null && loaded.version === '1.0.0' && loaded.pod !== before.get(n.metadata?.name ?? '');
    }) ? nodes : undefined);
}

/** The agent of `pod` took the fast path: nothing unloaded or loaded. */
async function expectFastPath(agents: AgentDriver, pod: V1Pod): Promise<void> {
  const log = await readFile(join(agents.logDir(), `${pod.metadata?.name ?? ''}.agent.log`), 'utf8');
  expect(log).toContain('skipping the reload');
  expect(log).not.toContain('driver loaded and verified');
}

async function workloads(world: RolloutWorld): Promise<Map<string, string>> {
  const pods = (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'workload=true' })).items;
  return new Map(pods.filter((p) => p.metadata?.deletionTimestamp == null).map((p) => [p.metadata?.name ?? '', p.metadata?.uid ?? '']));
}

describe('restart only: a new template that loads the loaded driver', () => {
  it('an image-only change finishes every node at upgrade-done without a cordon or an eviction; a deleted driver pod comes back on the fast path; a version change still cordons and evicts', async () => {
    const world = worlds.create('ronly');
    const { agents, v1, ready } = await twoNodesAt1(world);
    const [first, second] = world.nodeNames as [string, string];
    const podsBefore = new Map((await world.driverPods()).map((p) => [p.spec?.nodeName ?? '', podRef(p)]));
    await waitForNewPublishers(world, new Map());
    const gpuPods = await workloads(world);

    // 1. Image-only change: same DRIVER_VERSION, modules and parameters; a new image.
    const rebuilt = structuredClone(v1);
    const container = rebuilt.spec?.template.spec?.containers[0];
    if (container === undefined) throw new Error('the driver DaemonSet has no container');
    container.image = 'driver-rollout/agent:1.0.0-rebuilt';
    let restartMs = 0;
    await withoutCordon(world, async () => {
      const started = Date.now();
      await world.apps.replaceNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body: rebuilt });
      await ready('the rebuilt agent image', (images) => images.length === 2 && images.every((i) => i === container.image));
      await world.waitForStates({ [first]: 'upgrade-done', [second]: 'upgrade-done' }, 120_000);
      restartMs = Date.now() - started;
    });
    console.log(`image-only change: both nodes restarted and upgrade-done in ${restartMs} ms`);
    const restarted = await world.driverPods();
    expect(restarted.map((p) => p.spec?.nodeName).sort()).toEqual([first, second].sort());
    for (const pod of restarted) {
      expect(podRef(pod)).not.toBe(podsBefore.get(pod.spec?.nodeName ?? ''));
      expect(await agents.loadedVersion(pod.spec?.nodeName ?? '')).toBe('1.0.0');
      await expectFastPath(agents, pod);
    }
    expect(await workloads(world)).toEqual(gpuPods);
    // Events go out beside the writes (EventQueue): wait for both nodes'.
    const restartEvents = await waitUntil('both nodes\' restart-only Events', async () => {
      const found = (await world.events(upgradeEventReason(world.driver))).filter((e) => e.message.startsWith('restart only: driver unchanged'));
      return found.length >= 2 ? found : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    expect(restartEvents.map((e) => e.object).sort()).toEqual([first, second].sort());
    await waitForNewPublishers(world, podsBefore);

    // 2. A driver pod deleted by hand (outside the rollout): back on the fast path, the node untouched.
    const victim = restarted.find((p) => p.spec?.nodeName === first);
    if (victim === undefined) throw new Error('no driver pod on the first node');
    await withoutCordon(world, async () => {
      await world.core.deleteNamespacedPod({ name: victim.metadata?.name ?? '', namespace: world.ns.name });
      await ready('the recreated driver pod', (images) => images.length === 2);
      await world.waitForDriverPods((pods) => pods.length === 2 && !pods.some((p) => p.metadata?.uid === victim.metadata?.uid) && pods.every(isPodReady), 120_000);
    });
    const recreated = (await world.driverPods()).find((p) => p.spec?.nodeName === first);
    if (recreated === undefined) throw new Error('the driver pod was not recreated');
    await expectFastPath(agents, recreated);
    expect(await agents.loadedVersion(first)).toBe('1.0.0');
    expect(world.stateOf((await world.nodes()).find((n) => n.metadata?.name === first) ?? {})).toBe('upgrade-done');

    // 3. A version change: the full path as before (cordon, GPU pods evicted, the new driver loaded).
    await world.apps.replaceNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body: agents.daemonSet('2.0.0', await agents.source('2.0.0')) });
    await ready('driver 2.0.0', (images) => images.length === 2 && images.every((i) => i === 'driver-rollout/agent:2.0.0'));
    await world.waitForStates({ [first]: 'upgrade-done', [second]: 'upgrade-done' }, 120_000);
    const transitions = await waitUntil('both nodes\' cordon-required Events', async () => {
      const found = await world.events(upgradeEventReason(world.driver));
      const nodes = new Set(found.filter((e) => e.message.startsWith('Successfully updated node state label to [cordon-required]')).map((e) => e.object));
      return nodes.size >= 2 ? found : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    const cordoned = transitions.filter((e) => e.message.startsWith('Successfully updated node state label to [cordon-required]')).map((e) => e.object);
    expect([...new Set(cordoned)].sort()).toEqual([first, second].sort());
    for (const node of world.nodeNames) expect(await agents.loadedVersion(node)).toBe('2.0.0');
    await waitUntil('the GPU pods evicted', async () => ((await workloads(world)).size === 0 ? true : undefined), { timeoutMs: 30_000, intervalMs: 200 });
    expect(transitions.filter((e) => e.message.startsWith('restart only')).length).toBe(2);
  }, 1_500_000);
});
