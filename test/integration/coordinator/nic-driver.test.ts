import type { V1Node } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { AGENT_TEST_LEASE, AgentDriver } from './agent-driver.ts';
import { useRolloutWorlds } from './harness.ts';

const run = promisify(execFile);
const worlds = useRolloutWorlds({ beforeAll, afterEach });

/** The test bed's kubectl, as the seed documents run it. */
async function kubectl(args: readonly string[]): Promise<string> {
  const { stdout } = await run(join(sharedCluster().binDir, 'kubectl'), [`--kubeconfig=${sharedCluster().kubeconfigPath}`, ...args]);
  return stdout;
}

describe('an ofed rollout as the Network Operator documents it (seeds 000, 001), real init container and agent', () => {
  // NicClusterPolicy's ofedDriver.upgradePolicy as the seeds write it: no podDeletion block. The
  // driver's operator (Network Operator) has no pod-deletion step: the node is cordoned, waits
  // for its jobs and is drained before the driver loads.
  it('first install with safe load: cordon, wait for the job pod, drain the workload, and only then the driver loads', async () => {
    const world = worlds.create('ofed', 'ofed');
    await world.setUp([{}]);
    const node = world.nodeNames[0] ?? '';
    expect(world.keys.upgradeState).toBe('nvidia.com/ofed-driver-upgrade-state');
    const agents = await AgentDriver.start(world);
    // A node that joins with a workload and a job bound to it, before its driver pod.
    await world.createPod(node, 'workload');
    await world.createPod(node, 'job', { labels: { app: 'myapp' } });
    await world.createRollout({
      upgradePolicy: {
        autoUpgrade: true,
        maxParallelUpgrades: 0,
        waitForCompletion: { podSelector: 'app=myapp', timeoutSeconds: 0 },
        drain: { enable: true, force: true, podSelector: '', timeoutSeconds: 300, deleteEmptyDir: false },
      },
    });
    await world.startCoordinator(AGENT_TEST_LEASE);
    // Every state the node's label takes, and what the node looks like when the safe load is released.
    const states: string[] = [];
    let released: { state: string; cordoned: boolean } | undefined;
    const watch = await world.watchNodes((nodes) => {
      const n = nodes.get(node);
      if (n === undefined) return undefined;
      const state = world.stateOf(n);
      if (states.at(-1) !== state) states.push(state);
      const asked = n.metadata?.annotations?.[world.keys.waitForSafeLoad] !== undefined;
      if (asked) released = undefined;
      else if (released === undefined && states.includes('cordon-required')) released = { state, cordoned: n.spec?.unschedulable === true };
      return undefined;
    });
    await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: agents.daemonSet('1.0.0', await agents.source('1.0.0'), {}, { safeLoadGate: true }) });

    // The safe load asked for, the node cordoned and waiting for its job; nothing loaded yet.
    const waiting = await world.waitForNodes('the node cordoned, waiting for the job pod', (nodes) => {
      const n = nodes[0];
      return n !== undefined && world.stateOf(n) === 'wait-for-jobs-required' ? n : undefined;
    }, 300_000).catch(async (error: unknown) => {
      throw new Error(`states ${states.join(' → ')}; logs:\n${await agents.logs()}`, { cause: error });
    });
    expect(waiting.spec?.unschedulable).toBe(true);
    expect(waiting.metadata?.annotations?.[world.keys.waitForSafeLoad]).toBeDefined();
    expect(waiting.metadata?.annotations?.[world.keys.upgradeReason]).toMatch(/waiting for job pods: .*\/job/);
    expect(await agents.loadedVersion(node)).toBeUndefined();
    expect((await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'workload=true' })).items.map((p) => p.metadata?.name).sort()).toEqual(['job', 'workload']);

    // The job ends: the node is drained (the workload evicted, force: it has no controller), and the driver loads.
    await world.core.deleteNamespacedPod({ name: 'job', namespace: world.ns.name, gracePeriodSeconds: 0 });
    await world.waitForStates({ [node]: 'upgrade-done' }, 300_000).catch(async (error: unknown) => {
      throw new Error(`states ${states.join(' → ')}; logs:\n${await agents.logs()}`, { cause: error });
    });
    watch.stop();
    expect(await agents.loadedVersion(node)).toBe('1.0.0');
    expect((await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'workload=true' })).items).toEqual([]);
    // Stored states: never pod-deletion-required (the Network Operator's flow has none); the drain before the restart.
    expect(states).not.toContain('pod-deletion-required');
    const drainedAt = states.indexOf('drain-required');
    expect(drainedAt, states.join(' → ')).toBeGreaterThan(states.indexOf('wait-for-jobs-required'));
    expect(states.indexOf('pod-restart-required'), states.join(' → ')).toBeGreaterThan(drainedAt);
    // The load was released only in pod-restart-required, the node still cordoned (drained).
    expect(released).toEqual({ state: 'pod-restart-required', cordoned: true });
    const done = (await world.nodes())[0] as V1Node;
    expect(done.spec?.unschedulable).not.toBe(true);

    // Seed 001: `kubectl describe node <node_name> | grep nvidia.com/ofed-driver-upgrade-state`.
    const described = (await kubectl(['describe', 'node', node])).split('\n').filter((l) => l.includes('nvidia.com/ofed-driver-upgrade-state'));
    expect(described.map((l) => l.trim())).toEqual(['nvidia.com/ofed-driver-upgrade-state=upgrade-done']);
    // Every state is on record in the node's Events, the one passed without a step named with why.
    const events = await waitUntil('the upgrade-done Event', async () => {
      const found = (await world.events('OFEDDriverUpgrade')).filter((e) => e.object === node).map((e) => e.message);
      return found.some((m) => m.startsWith('Successfully updated node state label to [upgrade-done]')) ? found : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    expect(events.join('\n')).toContain('wait-for-jobs-required (no job pods to wait for) → pod-deletion-required (podDeletion off) → drain-required');
  }, 900_000);

  it('the seeds’ troubleshooting command unblocks a safe load by hand: kubectl annotate node <node> nvidia.com/ofed-driver-upgrade.driver-wait-for-safe-load-', async () => {
    const world = worlds.create('ofed-manual', 'ofed');
    await world.setUp([{}]);
    const node = world.nodeNames[0] ?? '';
    const agents = await AgentDriver.start(world);
    // No coordinator: the init container waits for the annotation to go, whoever removes it.
    await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: agents.daemonSet('1.0.0', await agents.source('1.0.0'), {}, { safeLoadGate: true }) });
    await world.waitForNodes('the safe load asked for', (nodes) => (nodes[0]?.metadata?.annotations?.[world.keys.waitForSafeLoad] === undefined ? undefined : true), 300_000);
    expect(await agents.loadedVersion(node)).toBeUndefined();
    await kubectl(['annotate', 'node', node, `${world.keys.waitForSafeLoad}-`]);
    await waitUntil('the driver loaded', async () => ((await agents.loadedVersion(node)) === '1.0.0' ? true : undefined), { timeoutMs: 300_000, intervalMs: 500 }).catch(async (error: unknown) => {
      throw new Error(`not loaded; logs:\n${await agents.logs()}`, { cause: error });
    });
  }, 600_000);
});
