/**
 * Whole rollouts, pass after pass, in the simulated world (simulate.ts): every node must end in
 * the expected state, within the limits at every step.
 */
import { describe, expect, it } from 'vitest';
import type { DriverRolloutPolicy } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { assignPool } from '../../../../coordinator/plan/assign-pool.ts';
import { stateOf } from '../../../../coordinator/plan/node-view.ts';
import { CORDONED_STATES } from '../../../../coordinator/plan/cordon-lost.ts';
import { planUpgrades } from '../../../../coordinator/plan/plan-upgrades.ts';
import { isOutOfService, isUpgrading } from '../../../../coordinator/plan/pool-capacity.ts';
import type { ClusterSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import { KEYS, NOW, aCluster, aNode, aPdb, aPod, aPolicy, effectsOf } from './fixtures.ts';
import { evolve, execute, randomFrom, type WorldOptions } from './simulate.ts';

interface Run {
  readonly final: ClusterSnapshot;
  readonly passes: number;
  readonly maxOutOfService: Map<string, number>;
  readonly maxUpgrading: Map<string, number>;
}

function run(start: ClusterSnapshot, policy: DriverRolloutPolicy, world: WorldOptions, maxPasses = 400): Run {
  let snapshot = start;
  let now = NOW;
  const random = randomFrom(42);
  const maxOutOfService = new Map<string, number>();
  const maxUpgrading = new Map<string, number>();
  let passes = 0;
  for (; passes < maxPasses; passes++) {
    const plan = planUpgrades(snapshot, policy, now);
    if (plan.nodePlans.length === 0 && plan.status.conditions.some((c) => c.type === 'Complete' && c.status === 'True')) break;
    snapshot = execute(snapshot, plan, now);
    const outOfService = new Map<string, number>();
    const upgrading = new Map<string, number>();
    for (const node of snapshot.nodes) {
      const pool = poolOf(node.labels, policy);
      if (pool === null) continue;
      const state = stateOf(node.labels, KEYS.upgradeState);
      if (isOutOfService({ state, unschedulable: node.unschedulable, ready: node.ready })) outOfService.set(pool, (outOfService.get(pool) ?? 0) + 1);
      if (isUpgrading(state)) upgrading.set(pool, (upgrading.get(pool) ?? 0) + 1);
    }
    for (const [pool, count] of outOfService) maxOutOfService.set(pool, Math.max(maxOutOfService.get(pool) ?? 0, count));
    for (const [pool, count] of upgrading) maxUpgrading.set(pool, Math.max(maxUpgrading.get(pool) ?? 0, count));
    snapshot = evolve(snapshot, random, world);
    now = plan.nextWakeAt !== null && plan.nextWakeAt > now ? Math.min(plan.nextWakeAt, now + 10_000) : now + 10_000;
  }
  return { final: snapshot, passes, maxOutOfService, maxUpgrading };
}

function poolOf(labels: Readonly<Record<string, string>>, policy: DriverRolloutPolicy): string | null {
  const pool = assignPool(labels, policy);
  return pool.kind === 'pool' ? pool.pool.name : null;
}

const statesOfAll = (snapshot: ClusterSnapshot): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const n of snapshot.nodes) {
    const s = stateOf(n.labels, KEYS.upgradeState);
    counts[s] = (counts[s] ?? 0) + 1;
  }
  return counts;
};

describe('whole rollouts in the simulated world', () => {
  it('20 nodes in two pools reach upgrade-done within each pool\'s limits; admin-cordoned nodes stay cordoned', () => {
    const nodes = Array.from({ length: 20 }, (_, i) => {
      const node = aNode(`n${String(i).padStart(2, '0')}`)
        .inState('upgrade-done')
        .outdated()
        .labelled({ pool: i < 12 ? 'a' : 'b' })
        .with(aPod(`train-${i}`).requesting('nvidia.com/gpu'), aPod(`web-${i}`));
      return i === 3 ? node.cordoned() : node;
    });
    const policy = aPolicy(
      { maxParallelUpgrades: 0, maxUnavailable: 1, podDeletion: {}, drain: { enable: true } },
      {
        pools: [
          { name: 'a', nodeSelector: { matchLabels: { pool: 'a' } }, maxUnavailable: '25%' },
          { name: 'b', nodeSelector: { matchLabels: { pool: 'b' } }, maxUnavailable: 2, maxParallelUpgrades: 1 },
        ],
      },
    );
    const result = run(aCluster(nodes), policy, { progress: 0.7 });
    expect(statesOfAll(result.final)).toEqual({ 'upgrade-done': 20 });
    expect(result.final.nodes.every((n) => n.driverPods.every((p) => p.revisionHash === 'rev-new' && p.ready))).toBe(true);
    expect(result.final.nodes.filter((n) => n.unschedulable).map((n) => n.name)).toEqual(['n03']);
    // Pool a: 12 nodes, 25% → 3 (n03, cordoned by an admin, is one of them). Pool b: 1 at a time.
    expect(result.maxOutOfService.get('a')).toBe(3);
    expect(result.maxUpgrading.get('b')).toBe(1);
    expect(result.final.nodes.every((n) => n.annotations[KEYS.upgradeReason] === undefined && n.annotations[KEYS.upgradeStartTime] === undefined)).toBe(true);
  });

  it('safe-load first install: every node is cordoned, the annotation cleared, the driver loads, the node uncordoned', () => {
    const nodes = Array.from({ length: 6 }, (_, i) =>
      aNode(`s${i}`).waitingForSafeLoad().driverNotReady().with(aPod(`rdma-${i}`).labelled({ net: 'rdma' })),
    );
    const policy = aPolicy({ maxParallelUpgrades: 2, maxUnavailable: '50%', podDeletion: { podSelector: 'net=rdma' } });
    const result = run(aCluster(nodes), policy, { progress: 0.6 });
    expect(statesOfAll(result.final)).toEqual({ 'upgrade-done': 6 });
    expect(result.final.nodes.every((n) => !n.unschedulable && n.annotations[KEYS.waitForSafeLoad] === undefined)).toBe(true);
    expect(result.final.nodes.every((n) => n.driverPods.every((p) => p.ready) && n.pods.length === 0)).toBe(true);
    expect(result.maxUpgrading.get('default')).toBe(2);
  });

  it('a PDB that never allows a disruption: that node fails after the drain timeout, the rest finish', () => {
    const nodes = [
      aNode('blocked').inState('upgrade-done').outdated().with(aPod('db-0').labelled({ app: 'db' })),
      aNode('free-1').inState('upgrade-done').outdated().with(aPod('web-1')),
      aNode('free-2').inState('upgrade-done').outdated().with(aPod('web-2')),
    ];
    const policy = aPolicy({ maxParallelUpgrades: 1, podDeletion: { enable: false }, drain: { enable: true, timeoutSeconds: 300 } });
    const result = run(aCluster(nodes, [aPdb('work', 'db-pdb', 'app=db', 0)]), policy, { progress: 0.7 });
    const blocked = result.final.nodes.find((n) => n.name === 'blocked');
    expect(stateOf(blocked?.labels ?? {}, KEYS.upgradeState)).toBe('upgrade-failed');
    expect(blocked?.unschedulable).toBe(true);
    expect(blocked?.annotations[KEYS.upgradeReason]).toMatch(/^drain timed out after 300s: PDB work\/db-pdb blocks eviction of work\/db-0/);
    expect(statesOfAll(result.final)).toEqual({ 'upgrade-done': 2, 'upgrade-failed': 1 });
  });

  it('a bad driver halts the rollout at maxFailedNodes instead of reaching every node', () => {
    const nodes = Array.from({ length: 8 }, (_, i) => aNode(`b${i}`).inState('upgrade-done').outdated());
    const policy = aPolicy({ maxParallelUpgrades: 1 }, { maxFailedNodes: 2 });
    const result = run(aCluster(nodes), policy, { progress: 0.8, badDriver: true }, 200);
    expect(statesOfAll(result.final)).toEqual({ 'upgrade-failed': 2, 'upgrade-required': 6 });
    // The agent never restarts its container: the nodes fail on its reported reason, not on restarts.
    const failed = result.final.nodes.filter((n) => stateOf(n.labels, KEYS.upgradeState) === 'upgrade-failed');
    for (const n of failed) {
      expect(n.annotations[KEYS.upgradeReason]).toMatch(/failed: CompileFailed: Failed: make exited with 2$/);
      expect(n.driverPods.every((p) => p.restartCount === 0)).toBe(true);
    }
    const plan = planUpgrades(result.final, policy, NOW + 86_400_000);
    expect(plan.status.halted).toBe(true);
    expect(plan.reasons.filter((r) => r.code === 'halted')).toHaveLength(6);
  });

  it('a GPU and a NIC driver rolled out at once on the same nodes: neither uncordons while the other holds the node; all end uncordoned', () => {
    const gpu = aPolicy({ maxParallelUpgrades: 2, maxUnavailable: '50%', drain: { enable: true } });
    const ofed = aPolicy({ maxParallelUpgrades: 1, maxUnavailable: '50%', drain: { enable: true } }, { driverName: 'ofed', selector: { matchLabels: { app: 'ofed' } } });
    const built = aCluster(Array.from({ length: 6 }, (_, i) => aNode(`m${i}`).inState('upgrade-done').outdated().with(aPod(`web-${i}`))));
    let world: ClusterSnapshot = {
      ...built,
      daemonSets: [...built.daemonSets, { namespace: 'gpu-operator', name: 'ofed-driver', updatedRevisionHash: 'ofed-new' }],
      nodes: built.nodes.map((n) => {
        const [gpuPod] = n.driverPods;
        if (gpuPod === undefined) throw new Error('fixture has a driver pod');
        return { ...n, driverPods: [gpuPod, { ...gpuPod, daemonSet: 'ofed-driver', name: `ofed-${n.name}`, uid: `ofed-${n.name}`, revisionHash: 'ofed-old' }] };
      }),
    };
    const only = (snapshot: ClusterSnapshot, ds: string): ClusterSnapshot => ({
      ...snapshot,
      daemonSets: snapshot.daemonSets.filter((d) => d.name === ds),
      nodes: snapshot.nodes.map((n) => ({ ...n, driverPods: n.driverPods.filter((p) => p.daemonSet === ds) })),
    });
    const mergeBack = (into: ClusterSnapshot, from: ClusterSnapshot, ds: string): ClusterSnapshot => ({
      ...into,
      nodes: from.nodes.map((n, i) => ({ ...n, driverPods: [...(into.nodes[i]?.driverPods ?? []).filter((p) => p.daemonSet !== ds), ...n.driverPods] })),
    });
    const random = randomFrom(7);
    let now = NOW;
    const ofedKeys = ofed.keys;
    for (let pass = 0; pass < 300; pass++) {
      for (const [policy, ds] of [[gpu, 'gpu-driver'], [ofed, 'ofed-driver']] as const) {
        const view = only(world, ds);
        const plan = planUpgrades(view, policy, now);
        world = mergeBack(world, execute(view, plan, now), ds);
        // An uncordon lets go of the driver's hold; the node is schedulable only once neither holds it.
        for (const node of world.nodes) {
          if (node.unschedulable) continue;
          for (const key of [KEYS.upgradeState, ofedKeys.upgradeState]) {
            const state = node.labels[key] ?? 'unknown';
            expect([...CORDONED_STATES, 'upgrade-failed'], `${ds}'s pass left ${node.name} schedulable while ${key} is ${state}`).not.toContain(state);
          }
        }
      }
      world = evolve(world, random, { progress: 0.6 });
      now += 5_000;
    }
    const states = world.nodes.map((n) => [n.labels[KEYS.upgradeState], n.labels[ofedKeys.upgradeState], n.unschedulable]);
    expect(states).toEqual(world.nodes.map(() => ['upgrade-done', 'upgrade-done', false]));
  });
});

describe('a pod scheduled onto a node after the pass that cordons it, before the cordon is stored', () => {
  const policy = aPolicy({ maxParallelUpgrades: 0, maxUnavailable: '100%', podDeletion: {} });
  const waiting = (): ClusterSnapshot => aCluster([aNode('n1').inState('upgrade-required').outdated()]);
  const n1Of = (snapshot: ClusterSnapshot) => snapshot.nodes.find((n) => n.name === 'n1');

  it('is not missed: the steps planned past the cordon stop, the node stays cordon-required, and the next pass evicts the pod before the driver restart', () => {
    const cluster = waiting();
    const plan = planUpgrades(cluster, policy, NOW);
    expect(effectsOf(plan, 'n1')).toContain('deleteDriverPod:gpu-operator/gpu-driver-n1');
    const train = aPod('train').requesting('nvidia.com/gpu').build();
    const withPod = { ...cluster, nodes: cluster.nodes.map((n) => ({ ...n, pods: [...n.pods, train] })) };
    const after = execute(withPod, plan, NOW);
    expect(stateOf(n1Of(after)?.labels ?? {}, KEYS.upgradeState)).toBe('cordon-required');
    expect(n1Of(after)?.unschedulable).toBe(true);
    expect(n1Of(after)?.driverPods.every((p) => !p.deleting)).toBe(true);
    expect(effectsOf(planUpgrades(after, policy, NOW + 1_000), 'n1')).toEqual(['state:wait-for-jobs-required', 'state:pod-deletion-required', 'evictPod:work/train']);
  });

  it('without one, the same plan restarts the driver once the cordon is stored', () => {
    const cluster = waiting();
    const after = execute(cluster, planUpgrades(cluster, policy, NOW), NOW);
    expect(stateOf(n1Of(after)?.labels ?? {}, KEYS.upgradeState)).toBe('pod-restart-required');
    expect(n1Of(after)?.driverPods.every((p) => p.deleting)).toBe(true);
  });
});
