import type { V1DaemonSet } from '@kubernetes/client-node';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runKbuild } from '../../../agent/build/run-kbuild.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { driverKeys, upgradeEventReason } from '../../../shared/keys.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { AGENT_TEST_LEASE, AgentDriver } from './agent-driver.ts';
import { asGpuDaemonSet, isPodReady, useRolloutWorlds, type RolloutWorld } from './harness.ts';

const worlds = useRolloutWorlds({ beforeAll, afterEach });
/** Bounds on waits only catch a hang: real agents compile with kbuild on a busy machine. */
const HANG_MS = 300_000;
/** ib_core's part: the ofed driver builds and loads drsample_core alone. */
const CORE = 'drsample_core';
/** nvidia_peermem's part: the gpu driver builds drsample_net alone, against drsample_core's Module.symvers, so it holds drsample_core. */
const PEER = 'drsample_net';

/**
 * The scenario of issue 32's last point with the real agents and the gpu driver's real init
 * container: two driver DaemonSets (ofed, and gpu whose module uses ofed's symbols) on the same
 * KWOK nodes, each node's agents sharing its simulated kernel, both changed at once in `order`
 * (one replaced right after the other, or both requests sent together). Returns what each node's
 * kernel showed, in order (its /sys/module versions, polled), and the world.
 */
type Order = 'ofed\'s change first' | 'gpu\'s change first' | 'both at once';

async function bothChangedAtOnce(world: RolloutWorld, gpu: string, options: { loadsAfter: boolean; order: Order | 'gpu paused, its change seen first' }): Promise<{ agents: AgentDriver; seen: Map<string, string[]>; stopWatching: () => Promise<void> }> {
  await world.setUp([{}, {}]);
  const agents = await AgentDriver.start(world);
  await agents.runPods('app=gpu-driver', { name: gpu, loadsAfterWorldDriver: true });
  const symvers = await coreSymvers(agents);
  const policy = { maxParallelUpgrades: 0, maxUnavailable: '100%', podDeletion: { enable: false } } as const;
  await world.createRollout({ upgradePolicy: policy });
  await world.createRollout({ driverName: gpu, selector: { matchLabels: { app: 'gpu-driver' } }, ...(options.loadsAfter ? { loadsAfter: [world.driver] } : {}), upgradePolicy: policy }, 'gpu');
  await world.startCoordinator(AGENT_TEST_LEASE);

  // First install: ofed's driver, then gpu's (its init container asks for a safe load; the coordinator lets it load).
  const ofedSet = async (version: string): Promise<V1DaemonSet> => agents.daemonSet(version, await agents.source(version, [CORE]), {}, { modules: [CORE] });
  const gpuSet = async (version: string): Promise<V1DaemonSet> =>
    asGpuDaemonSet(agents.daemonSet(version, await agents.source(version, [PEER]), { MAKE_VARIABLES: `KBUILD_EXTRA_SYMBOLS=${symvers}`, DEPENDENCY_SYMVERS: symvers, UNLOAD_ON_STOP: 'true' }, { safeLoadGate: true, driver: gpu, modules: [PEER] }));
  await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: await ofedSet('1.0.0') });
  await waitForLoaded(world, agents, CORE, '1.0.0');
  await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: await gpuSet('1.0.0') });
  await waitForLoaded(world, agents, PEER, '1.0.0');
  const ofedKeys = world.keys;
  const gpuKeys = driverKeys(gpu, world.keys.domain);
  await world.waitForNodes('both drivers upgrade-done', (nodes) =>
    nodes.length === world.nodeNames.length && nodes.every((n) => n.metadata?.labels?.[ofedKeys.upgradeState] === 'upgrade-done' && n.metadata.labels[gpuKeys.upgradeState] === 'upgrade-done') ? true : undefined, HANG_MS)
    .catch(async (error: unknown) => {
      throw new Error(`first install; logs:\n${await agents.logs()}`, { cause: error });
    });

  // What each node's kernel shows, every 50 ms: `<module> <version>` when it changes, `<module> gone` when unloaded.
  const seen = new Map<string, string[]>();
  const polling = { on: true };
  const poll = (async () => {
    const last = new Map<string, string>();
    while (polling.on) {
      for (const node of world.nodeNames) {
        for (const module of [PEER, CORE]) {
          const now = `${module} ${(await agents.loadedVersion(node, module)) ?? 'gone'}`;
          if (last.get(`${node}/${module}`) === now) continue;
          last.set(`${node}/${module}`, now);
          seen.set(node, [...(seen.get(node) ?? []), now]);
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  const stopWatching = async (): Promise<void> => {
    polling.on = false;
    await poll;
  };
  world.onTearDown(stopWatching);
  await waitUntil('the kernels watched', () => Promise.resolve(world.nodeNames.every((n) => (seen.get(n) ?? []).length === 2) ? true : undefined), { timeoutMs: 10_000, intervalMs: 50 });

  const [ofedBody, gpuBody] = [await ofedSet('2.0.0'), await gpuSet('2.0.0')];
  const changeOfed = async (): Promise<unknown> => world.apps.replaceNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body: ofedBody });
  const changeGpu = async (): Promise<unknown> => world.apps.replaceNamespacedDaemonSet({ name: 'gpu', namespace: world.ns.name, body: gpuBody });
  switch (options.order) {
    case 'ofed\'s change first':
      await changeOfed();
      await changeGpu();
      break;
    case 'gpu\'s change first':
      await changeGpu();
      await changeOfed();
      break;
    case 'both at once':
      await Promise.all([changeOfed(), changeGpu()]);
      break;
    case 'gpu paused, its change seen first':
      // So that ofed surely reaches its driver restart while gpu's old driver is still loaded.
      await patchRollout(world, 'gpu', { autoUpgrade: false });
      await changeGpu();
      await world.waitForNodes('gpu upgrade-required', (nodes) => (nodes.length === world.nodeNames.length && nodes.every((n) => n.metadata?.labels?.[gpuKeys.upgradeState] === 'upgrade-required') ? true : undefined), HANG_MS);
      await changeOfed();
  }
  return { agents, seen, stopWatching };
}

describe('drivers that share a node go in order (loadsAfter), real agents whose simulated kernels model the dependency', () => {
  it.each(['ofed\'s change first', 'gpu\'s change first', 'both at once'] as const)('two rollouts changed at once, %s: gpu (peermem, holding ib_core) is stopped before ofed reloads, ofed loads before gpu, both on their new revision, on every node', async (order) => {
    const world = worlds.create('order-agents');
    const gpu = `g${randomBytes(4).toString('hex')}`;
    const gpuKeys = driverKeys(gpu, world.keys.domain);
    const { agents, seen, stopWatching } = await bothChangedAtOnce(world, gpu, { loadsAfter: true, order });
    const failWithLogs = async (error: unknown): Promise<never> => {
      const nodes = (await world.core.listNode()).items.filter((n) => world.nodeNames.includes(n.metadata?.name ?? ''));
      const states = nodes.map((n) => `${n.metadata?.name}: ofed ${world.stateOf(n)} (${n.metadata?.annotations?.[world.keys.upgradeReason] ?? ''}), gpu ${n.metadata?.labels?.[gpuKeys.upgradeState]} (${n.metadata?.annotations?.[gpuKeys.upgradeReason] ?? ''})`);
      throw new Error(`${states.join('; ')}; kernels seen: ${JSON.stringify(Object.fromEntries(seen))}; logs:\n${await agents.logs()}`, { cause: error });
    };

    // Every node upgrade-done for both drivers and uncordoned holds right after the change too,
    // before the coordinator has seen it: the end is that with both drivers' pods Ready at 2.0.0.
    const readyPods = async (): Promise<string[]> => (await world.core.listNamespacedPod({ namespace: world.ns.name })).items
      .filter((p) => isPodReady(p) && p.metadata?.deletionTimestamp == null).map((p) => `${p.metadata?.labels?.app} ${p.spec?.containers[0]?.image}`).sort();
    const newPods = [...world.nodeNames.map(() => 'driver driver-rollout/agent:2.0.0'), ...world.nodeNames.map(() => 'gpu-driver driver-rollout/agent:2.0.0')];
    await waitUntil('both drivers upgrade-done, uncordoned, with their pods Ready at 2.0.0', async () => {
      const nodes = await world.nodes();
      const done = nodes.length === world.nodeNames.length && nodes.every((n) => n.metadata?.labels?.[world.keys.upgradeState] === 'upgrade-done' && n.metadata.labels[gpuKeys.upgradeState] === 'upgrade-done' && n.spec?.unschedulable !== true);
      return done && JSON.stringify(await readyPods()) === JSON.stringify(newPods) ? true : undefined;
    }, { timeoutMs: HANG_MS, intervalMs: 500 }).catch(failWithLogs);
    await waitForLoaded(world, agents, PEER, '2.0.0').catch(failWithLogs);
    await stopWatching();

    for (const node of world.nodeNames) {
      expect(await agents.loadedVersion(node, CORE), node).toBe('2.0.0');
      // The kernel's own order (ib_core's unload and reload may fall between two polls): peermem
      // gone when ib_core's new version came, and nothing after it but the new peermem. Before it,
      // gpu's new driver may have loaded and been stopped again (its change seen before ofed's).
      const order = (seen.get(node) ?? []).filter((s) => s !== `${CORE} gone`);
      const reloaded = order.indexOf(`${CORE} 2.0.0`);
      expect(reloaded, `${node}: ${JSON.stringify(order)}`).toBeGreaterThan(0);
      expect(order.slice(0, reloaded).filter((s) => s.startsWith(PEER)).at(-1), `${node}: ${JSON.stringify(order)}`).toBe(`${PEER} gone`);
      expect(order.slice(reloaded), node).toEqual([`${CORE} 2.0.0`, `${PEER} 2.0.0`]);
    }
    // No agent met a driver in use, and each node's Events show both drivers' flows to upgrade-done.
    expect(await agents.logs()).not.toMatch(/DriverInUse|is in use/);
    for (const node of world.nodeNames) {
      for (const reason of [upgradeEventReason(world.driver), upgradeEventReason(gpu)]) {
        await waitUntil(`${node}'s ${reason} Events: the driver restarted, and upgrade-done`, async () => {
          const found = (await world.events(reason)).filter((e) => e.object === node).map((e) => e.message);
          return found.some((m) => m.includes('pod-restart-required')) && found.some((m) => m.startsWith('Successfully updated node state label to [upgrade-done]')) ? found : undefined;
        }, { timeoutMs: 30_000, intervalMs: 200 });
      }
    }
  }, 4 * HANG_MS);

  it('without loadsAfter, the same change reloads ofed under gpu\'s loaded driver: the kernel refuses (DriverInUse, held by drsample_net)', async () => {
    const world = worlds.create('order-agents-none');
    const gpu = `g${randomBytes(4).toString('hex')}`;
    const { agents } = await bothChangedAtOnce(world, gpu, { loadsAfter: false, order: 'gpu paused, its change seen first' });
    await waitUntil('every node\'s new ofed agent refused', async () => {
      const logs = await agents.logs();
      return world.nodeNames.every((n) => logs.split('\n').some((l) => l.includes(`"node":"${n}"`) && l.includes('driver is in use: drsample_core (refcnt 1, holders [drsample_net]'))) ? true : undefined;
    }, { timeoutMs: HANG_MS, intervalMs: 1_000 }).catch(async (error: unknown) => {
      throw new Error(`logs:\n${await agents.logs()}`, { cause: error });
    });
    for (const node of world.nodeNames) {
      expect(await agents.loadedVersion(node, CORE), node).toBe('1.0.0');
      expect(await agents.loadedVersion(node, PEER), node).toBe('1.0.0');
    }
  }, 4 * HANG_MS);
});


/** Patches the rollout's upgradePolicy and waits for the coordinator to have seen it (status.observedGeneration). */
async function patchRollout(world: RolloutWorld, name: string, upgradePolicy: Record<string, unknown>): Promise<void> {
  const ref = { group: 'driverrollout.io', version: 'v1alpha1', plural: 'driverrollouts', namespace: world.ns.name, name };
  const patched = (await world.custom.patchNamespacedCustomObject({ ...ref, body: { spec: { upgradePolicy } } }, MERGE_PATCH)) as { metadata: { generation: number } };
  await waitUntil(`${name}'s new generation seen`, async () => {
    const rollout = (await world.custom.getNamespacedCustomObject(ref)) as { status?: { observedGeneration?: number } };
    return (rollout.status?.observedGeneration ?? 0) >= patched.metadata.generation ? true : undefined;
  }, { timeoutMs: 60_000, intervalMs: 200 });
}

async function waitForLoaded(world: RolloutWorld, agents: AgentDriver, module: string, version: string): Promise<void> {
  await waitUntil(`${module} ${version} loaded on every node`, async () => {
    const versions = await Promise.all(world.nodeNames.map((n) => agents.loadedVersion(n, module)));
    return versions.every((v) => v === version) ? true : undefined;
  }, { timeoutMs: HANG_MS, intervalMs: 500 }).catch(async (error: unknown) => {
    throw new Error(`logs:\n${await agents.logs()}`, { cause: error });
  });
}

/**
 * drsample_core's Module.symvers, as MOFED's build tree provides ib_core's to nvidia_peermem's
 * build: a real kbuild of the core alone (its exported symbol's CRC does not change between versions).
 */
async function coreSymvers(agents: AgentDriver): Promise<string> {
  const dir = await agents.source('symvers', [CORE]);
  await runKbuild({ headersDir: `/usr/src/linux-headers-${agents.kernel}`, sourceDir: dir, kernelVersion: agents.kernel, makeVariables: {}, jobs: 2, home: await mkdtemp(join(agents.work, 'home-')) });
  return join(dir, 'Module.symvers');
}
