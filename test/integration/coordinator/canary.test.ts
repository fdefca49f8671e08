import type { V1Node } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { isPodReady, UPGRADING, useRolloutWorlds, type RolloutWorld } from './harness.ts';

// The canary end to end on the real control plane (KWOK nodes, the real DaemonSet controller and
// its ControllerRevisions), approved with the kubectl plugin as a user runs it, and a failed
// canary brought back to the previous driver: by the coordinator (onCanaryFailure: Rollback) and
// by hand (`kubectl rollout undo`).

const worlds = useRolloutWorlds({ beforeAll, afterEach });
const cluster = sharedCluster();
const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../../..');
/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;

/** `kubectl ARGS` through the test bed's kubectl, the plugin on PATH (cli/kubectl-driver_rollout), as a user types it. */
async function kubectl(args: readonly string[]): Promise<string> {
  const env = { ...process.env, PATH: `${join(ROOT, 'cli')}:${process.env.PATH ?? ''}`, KUBECONFIG: cluster.kubeconfigPath };
  const { stdout } = await run(join(cluster.binDir, 'kubectl'), [...args], { env });
  return stdout;
}

type CanaryStatus = { phase?: string; nodes?: string[]; revision?: string; approvedBy?: string | null; failure?: string | null } | null | undefined;
const canaryOf = (status: Record<string, unknown>): CanaryStatus => status.canary as CanaryStatus;
const imageOn = async (world: RolloutWorld): Promise<Map<string, string>> =>
  new Map((await world.driverPods()).filter(isPodReady).map((p) => [p.spec?.nodeName ?? '', p.spec?.containers[0]?.image ?? '']));

/** Every driver pod Ready on `image` and every node upgrade-done and schedulable. */
async function waitForAllOn(world: RolloutWorld, image: string): Promise<void> {
  await waitUntil(`every node upgrade-done on ${image}`, async () => {
    const pods = await world.driverPods();
    if (pods.length !== world.nodeNames.length || !pods.every((p) => isPodReady(p) && p.spec?.containers[0]?.image === image)) return undefined;
    const nodes = await world.nodes();
    return nodes.every((n) => world.stateOf(n) === 'upgrade-done' && n.spec?.unschedulable !== true) ? true : undefined;
  }, { timeoutMs: HANG_MS, intervalMs: 200 });
}

/** A template whose pods never turn Ready (a readiness gate nobody sets), as a broken driver. */
async function pushBrokenDriver(world: RolloutWorld): Promise<void> {
  await world.apps.replaceNamespacedDaemonSet({
    name: 'driver',
    namespace: world.ns.name,
    body: world.daemonSetWith({ terminationGracePeriodSeconds: 0, readinessGates: [{ conditionType: 'example.com/never' }], containers: [{ name: 'driver', image: 'driver:broken' }] }),
  });
}

/**
 * The canaries carry the revision, the rest wait naming them. The waiting nodes' reasons are
 * written beside the passes (marks, two at a time) and may trail the status: waited for.
 */
async function expectRecordedOnNodes(world: RolloutWorld, canaryNodes: readonly string[], revision: string): Promise<void> {
  const waiting = `waiting for approval of canary nodes ${canaryNodes.join(', ')} (revision ${revision}): kubectl driver-rollout approve`;
  const recorded = (n: V1Node): string | undefined => {
    const annotations = n.metadata?.annotations ?? {};
    return canaryNodes.includes(n.metadata?.name ?? '') ? annotations[world.keys.canary] : annotations[world.keys.upgradeReason];
  };
  const expected = (n: V1Node): string => (canaryNodes.includes(n.metadata?.name ?? '') ? revision : waiting);
  const nodes = await world.waitForNodes('the canary and the waiting nodes recorded', (all) => (all.every((n) => recorded(n) === expected(n)) ? all : undefined), HANG_MS);
  expect(nodes).toHaveLength(world.nodeNames.length);
}

describe('a canary on the real control plane', () => {
  it('upgrades 2 of 8 nodes first, keeps that set across a coordinator restart, holds the rest until approved with the plugin, then rolls the rest within the limits', async () => {
    const world = worlds.create('canary');
    await world.setUp(Array.from({ length: 8 }, () => ({})));
    await world.createDriver('driver:v1');
    await world.createRollout({ canary: { nodes: 2 }, upgradePolicy: { maxParallelUpgrades: 2, maxUnavailable: 2, podDeletion: { enable: false } } });
    const first = await world.startCoordinator();
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])));

    let approvedAt: number | null = null;
    const startedBeforeApproval = new Set<string>();
    const watch = await world.watchNodes((nodes) => {
      let out = 0;
      for (const [name, node] of nodes) {
        const upgrading = UPGRADING.has(world.stateOf(node));
        if (upgrading && approvedAt === null) startedBeforeApproval.add(name);
        if (upgrading || node.spec?.unschedulable === true) out += 1;
      }
      return out > 2 ? `${out} nodes out of service (maxUnavailable 2)` : undefined;
    });
    await world.bumpDriver('driver:v2');

    const waiting = await world.waitForStatus('the canary waiting for approval', (s) => canaryOf(s)?.phase === 'WaitingForApproval', HANG_MS);
    const canary = canaryOf(waiting);
    expect(canary?.nodes).toHaveLength(2);
    const canaryNodes = new Set(canary?.nodes);
    await expectRecordedOnNodes(world, [...canaryNodes].sort(), canary?.revision ?? '');
    const images = await imageOn(world);
    expect(world.nodeNames.filter((n) => images.get(n) === 'driver:v2').sort()).toEqual([...canaryNodes].sort());
    expect([...startedBeforeApproval].sort()).toEqual([...canaryNodes].sort());
    // A restarted coordinator keeps the set: it reads it from the nodes, chooses nothing anew.
    await first.stop();
    const { port } = await world.startCoordinator();
    const phaseSeries = `driver_rollout_canary_phase{namespace="${world.ns.name}",rollout="driver",driver="${world.driver}",phase="WaitingForApproval"} 1`;
    await waitUntil('the new coordinator’s canary', async () => ((await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).includes(phaseSeries) ? true : undefined), { timeoutMs: 60_000, intervalMs: 200 });
    await expectRecordedOnNodes(world, [...canaryNodes].sort(), canary?.revision ?? '');
    expect([...startedBeforeApproval].sort()).toEqual([...canaryNodes].sort());
    const shown = await kubectl(['driver-rollout', 'status', '-n', world.ns.name, '--width', '200']);
    expect(shown).toContain(`canary WaitingForApproval · nodes ${[...canaryNodes].sort().join(', ')} · revision ${canary?.revision ?? ''}`);

    approvedAt = Date.now();
    const approved = await kubectl(['driver-rollout', 'approve', '-n', world.ns.name]);
    expect(approved).toMatch(new RegExp(`revision ${canary?.revision ?? ''} approved by \\S+`));
    await waitForAllOn(world, 'driver:v2');
    watch.stop();
    expect(watch.violations).toEqual([]);

    const done = await world.waitForStatus('the canary approved and rolled', (s) => canaryOf(s)?.phase === 'Rolling' && typeof canaryOf(s)?.approvedBy === 'string');
    const approver = canaryOf(done)?.approvedBy ?? '';
    expect(approved).toContain(`approved by ${approver}`);
    const events = await waitUntil('the CanaryApproved Event', async () => {
      const found = await world.events('CanaryApproved', world.ns.name);
      return found.length > 0 ? found : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    expect(events).toHaveLength(1);
    expect(events[0]?.message).toContain(`approved by ${approver}`);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain(`driver_rollout_canary_phase{namespace="${world.ns.name}",rollout="driver",driver="${world.driver}",phase="Rolling"} 1`);
    // Two waves of eight KWOK nodes and a coordinator restart: 76 s at a quiet moment, over 180 s at load 25.
  }, 600_000);
});

describe('a failed canary and the way back', () => {
  /**
   * Four nodes on driver:v1, a canary of one, then a driver whose pod fails its node 3 s after the
   * restart. Returns the canary node (read from its annotation) and every node that ever left
   * upgrade-done / upgrade-required from the push on.
   */
  async function brokenCanary(prefix: string, onCanaryFailure: 'Halt' | 'Rollback'): Promise<{ world: RolloutWorld; canaryNode: string; touched: Set<string> }> {
    const world = worlds.create(prefix);
    await world.setUp([{}, {}, {}, {}]);
    await world.createDriver('driver:v1');
    await world.createRollout({ canary: { nodes: 1 }, onCanaryFailure, upgradePolicy: { maxParallelUpgrades: 2, maxUnavailable: 2, podDeletion: { enable: false }, podRestart: { timeoutSeconds: 3 } } });
    await world.startCoordinator();
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])));
    const touched = new Set<string>();
    await world.watchNodes((nodes) => {
      for (const [name, n] of nodes) if (UPGRADING.has(world.stateOf(n)) || world.stateOf(n) === 'upgrade-failed') touched.add(name);
      return undefined;
    });
    // The new ControllerRevision must be created in a later second than the first (how a rollback is told apart).
    await new Promise((settle) => setTimeout(settle, 1_100));
    await pushBrokenDriver(world);
    const canaryNode = await world.waitForNodes('the canary node marked', (nodes) => nodes.find((n) => n.metadata?.annotations?.[world.keys.canary] !== undefined)?.metadata?.name, HANG_MS);
    return { world, canaryNode, touched };
  }

  /** Only the canary node ever took the broken driver; after the way back every node is on v1, done. */
  async function expectBackOnV1(world: RolloutWorld, canaryNode: string, touched: Set<string>): Promise<void> {
    await waitForAllOn(world, 'driver:v1');
    expect([...touched]).toEqual([canaryNode]);
    const status = await world.waitForStatus('Complete, no canary', (s) => s.canary == null && (s.conditions as { type: string; status: string }[]).some((c) => c.type === 'Complete' && c.status === 'True'));
    expect(status.nodes).toMatchObject({ total: 4, done: 4, failed: 0 });
    const node = (await world.nodes()).find((n: V1Node) => n.metadata?.name === canaryNode);
    expect(node?.metadata?.annotations?.[world.keys.canary]).toBeUndefined();
  }

  it('onCanaryFailure Rollback: the canary node fails, the coordinator puts the previous template back (an Event says so), the canary node returns to v1 and the rollout ends done', async () => {
    const { world, canaryNode, touched } = await brokenCanary('rollback', 'Rollback');
    const rollbacks = await waitUntil('the CanaryRollback Event', async () => {
      const found = await world.events('CanaryRollback', world.ns.name);
      return found.length > 0 ? found : undefined;
    }, { timeoutMs: HANG_MS, intervalMs: 200 });
    expect(rollbacks[0]?.message).toMatch(/^rolled daemonset\/driver back from revision \S+ to \S+ \(its ControllerRevision's template\): canary failed: canary node \S+ failed: no Ready driver pod 3s after the restart began/);
    const ds = await world.apps.readNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name });
    expect(ds.spec?.template.spec?.containers[0]?.image).toBe('driver:v1');
    expect(ds.spec?.template.spec?.readinessGates ?? []).toEqual([]);
    await expectBackOnV1(world, canaryNode, touched);
  });

  it('onCanaryFailure Halt: the rest wait, naming the failure; `kubectl rollout undo` brings the canary node back to v1 and the rollout ends done', async () => {
    const { world, canaryNode, touched } = await brokenCanary('undo', 'Halt');
    const others = world.nodeNames.filter((n) => n !== canaryNode);
    const halted = await world.waitForNodes('the others held by the failed canary', (nodes) => {
      const reasons = nodes.filter((n) => others.includes(n.metadata?.name ?? '')).map((n) => n.metadata?.annotations?.[world.keys.upgradeReason] ?? '');
      return reasons.every((r) => r.startsWith(`halted: canary failed: canary node ${canaryNode} failed: no Ready driver pod 3s`)) ? reasons : undefined;
    }, HANG_MS);
    expect(halted).toHaveLength(3);
    const ds = await world.apps.readNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name });
    expect(ds.spec?.template.spec?.containers[0]?.image).toBe('driver:broken');

    await kubectl(['rollout', 'undo', 'daemonset/driver', '-n', world.ns.name]);
    await expectBackOnV1(world, canaryNode, touched);
    expect(await world.events('CanaryRollback', world.ns.name)).toEqual([]);
    const failedEvents = await world.events('CanaryFailed', world.ns.name);
    expect(failedEvents.map((e) => e.message)).toEqual([expect.stringContaining(`failed: canary node ${canaryNode} failed: no Ready driver pod 3s`)]);
  });
});
