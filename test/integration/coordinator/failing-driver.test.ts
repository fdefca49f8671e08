import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from '../../bed/wait-until.ts';
import { AgentDriver } from './agent-driver.ts';
import { isPodReady, useRolloutWorlds } from './harness.ts';

// The real agent on every node (process kubelet), the real coordinator with the DriverRollout's
// default podRestart settings. One node boots into a kernel whose headers are not installed
// (the most common reason a driver build breaks, anchors-2 "User pain" 8): its new driver really
// fails to build, the agent reports KernelHeadersMissing and retries in-process, never exiting.

const worlds = useRolloutWorlds({ beforeAll, afterEach });

const MISSING_KERNEL = '6.99.0-1-amd64';

function agentCondition(pod: V1Pod, type: string): { status?: string; reason?: string; message?: string } | undefined {
  return pod.status?.conditions?.find((c) => c.type === type);
}

describe('a driver that fails to build on one node, real agents', () => {
  it('fails that node with the agent’s reason after podRestart.failAfterSeconds (default), and maxFailedNodes halts new starts', async () => {
    const world = worlds.create('fail');
    const order = (n: number) => ({ labels: { 'driver-rollout.test/order': String(n) } });
    await world.setUp([order(0), order(1), order(2)]);
    const [first, broken, last] = world.nodeNames as [string, string, string];
    // The broken node runs its current driver fine; from the upgrade on it has rebooted into a kernel without headers.
    const rebooted = new Set<string>();
    const agents = await AgentDriver.start(world, { nodeEnv: (node) => (rebooted.has(node) ? { KERNEL_VERSION: MISSING_KERNEL } : {}) });
    await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: agents.daemonSet('1.0.0', await agents.source('1.0.0')) });
    await world.waitForDriverPods((pods) => pods.length === 3 && pods.every(isPodReady), 240_000);
    await world.createRollout({ maxFailedNodes: 1, priorityLabel: 'driver-rollout.test/order', upgradePolicy: { maxParallelUpgrades: 1, maxUnavailable: '100%' } });
    await world.startCoordinator();
    await world.waitForStates({ [first]: 'upgrade-done', [broken]: 'upgrade-done', [last]: 'upgrade-done' });

    const started: string[] = [];
    const watch = await world.watchNodes((nodes) => {
      for (const [name, n] of nodes) if (world.stateOf(n) === 'cordon-required' && !started.includes(name)) started.push(name);
      return undefined;
    });
    rebooted.add(broken);
    await world.apps.replaceNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body: agents.daemonSet('2.0.0', await agents.source('2.0.0')) });

    await world.waitForStates({ [first]: 'upgrade-done' }, 240_000);
    // The agent's first failure report on the broken node's new pod: the clock of failAfterSeconds.
    const failingSince = await waitUntil('the broken node’s agent to report KernelHeadersMissing', async () => {
      const pod = (await world.driverPods()).find((p) => p.spec?.nodeName === broken && p.metadata?.deletionTimestamp == null);
      return pod !== undefined && agentCondition(pod, world.keys.driverReadyCondition)?.reason === 'KernelHeadersMissing' ? Date.now() : undefined;
    }, { timeoutMs: 120_000, intervalMs: 100 });
    const [failed] = (await world.waitForStates({ [broken]: 'upgrade-failed' }, 240_000)).filter((n) => n.metadata?.name === broken) as [V1Node];
    const seconds = (Date.now() - failingSince) / 1000;
    process.stdout.write(`[failing-driver] first KernelHeadersMissing report → upgrade-failed: ${seconds.toFixed(1)} s (podRestart.failAfterSeconds default 120)\n`);
    expect(seconds).toBeGreaterThanOrEqual(110);

    const reason = failed.metadata?.annotations?.[world.keys.upgradeReason] ?? '';
    expect(reason).toMatch(new RegExp(`failed: KernelHeadersMissing: Failed: .*${MISSING_KERNEL.replaceAll('.', '\\.')}`));
    expect(failed.spec?.unschedulable).toBe(true);
    const warnings = (await world.events(`${world.driver.toUpperCase()}DriverUpgrade`)).filter((e) => e.object === broken && e.type === 'Warning');
    expect(warnings.map((e) => e.message)).toContain(reason);
    const status = await world.waitForStatus('the failed node and the halt', (s) =>
      (s.waiting as { node: string; reason: string }[] | undefined)?.some((w) => w.node === broken && w.reason === reason) === true && s.halted === true);
    expect((status.nodes as { failed: number }).failed).toBe(1);

    // Halted: the last node never starts, however long we look.
    await new Promise((r) => setTimeout(r, 3_000));
    watch.stop();
    expect(started).toEqual([first, broken]);
    const lastNode = (await world.nodes()).find((n) => n.metadata?.name === last);
    expect(lastNode === undefined ? undefined : world.stateOf(lastNode)).toBe('upgrade-required');
    expect(lastNode?.metadata?.annotations?.[world.keys.upgradeReason]).toMatch(/^halted: failure budget reached/);
    // The agent never exited: the failure was seen on its condition, not through restarts.
    const brokenPod = (await world.driverPods()).find((p) => p.spec?.nodeName === broken);
    expect(brokenPod?.status?.containerStatuses?.[0]?.restartCount ?? 0).toBe(0);
  }, 600_000);
});
