/**
 * Pacing: a minimum delay between starts per pool, and a soak after each node's upgrade that
 * keeps its parallel slot. Both are read from the nodes' annotations (restart-safe), and each
 * hold wakes the planner when it ends: a pass at that time, with nothing else changed, starts
 * the next node.
 */
import { describe, expect, it } from 'vitest';
import { applyActions } from '../../../../coordinator/plan/apply-actions.ts';
import type { Plan } from '../../../../coordinator/plan/action.ts';
import type { ClusterSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import { KEYS, NOW, aCluster, aNode, aPolicy, annotationWrites, planAt, reasonOf, secondsAgo } from './fixtures.ts';

const started = (plan: Plan): string[] =>
  plan.nodePlans.filter((p) => p.actions.some((a) => a.kind === 'setState' && a.to === 'cordon-required')).map((p) => p.node);

/** The cluster once every action of `plan` is stored. */
const stored = (cluster: ClusterSnapshot, plan: Plan): ClusterSnapshot => applyActions(cluster, plan.nodePlans.flatMap((p) => p.actions));

const outdated = (...names: string[]) => names.map((n) => aNode(n).inState('upgrade-done').outdated());

describe('minSecondsBetweenStarts', () => {
  const policy = aPolicy({ minSecondsBetweenStarts: 600 });

  it('starts one node, holds the next until the delay ends, and wakes the planner then', () => {
    const plan = planAt(aCluster(outdated('a', 'b')), policy);
    expect(started(plan)).toEqual(['a']);
    expect(annotationWrites(plan, 'a')[KEYS.lastStartTime]).toBe(secondsAgo(0));
    expect(reasonOf(plan, 'b')).toMatchObject({
      code: 'start-delay',
      message: 'pacing: pool default starts a node at most every 600s (minSecondsBetweenStarts)',
      detail: 'pacing: last start in pool default 0s ago, next in 600s (minSecondsBetweenStarts 600)',
    });
    expect(plan.nextWakeAt).toBe(NOW + 600_000);
  });

  it('at the wake time, with nothing else changed in the cluster, the next node starts', () => {
    const first = aCluster(outdated('a', 'b'));
    const firstPlan = planAt(first, policy);
    const wake = firstPlan.nextWakeAt ?? Number.NaN;
    const quiet = stored(first, firstPlan);
    expect(started(planAt(quiet, policy, wake - 1_000))).toEqual([]);
    expect(started(planAt(quiet, policy, wake))).toEqual(['b']);
  });

  it('reads the last start from the nodes: a node done since, or one still upgrading, keeps the pace (a new leader too)', () => {
    const done = aNode('a').inState('upgrade-done').annotated({ [KEYS.lastStartTime]: secondsAgo(100) });
    const upgrading = aNode('a').inState('drain-required').cordoned().annotated({ [KEYS.upgradeStartTime]: secondsAgo(200) });
    for (const [node, waited] of [[done, 100], [upgrading, 200]] as const) {
      const plan = planAt(aCluster([node, ...outdated('b')]), policy);
      expect(started(plan)).toEqual([]);
      expect(reasonOf(plan, 'b')?.code).toBe('start-delay');
      expect(plan.nextWakeAt).toBe(NOW + (600 - waited) * 1000);
    }
  });

  it('paces each pool on its own, with a pool’s own delay over the top-level one', () => {
    const pools = [{ name: 'fast', nodeSelector: { matchLabels: { pool: 'fast' } }, minSecondsBetweenStarts: 0 }];
    const cluster = aCluster([...outdated('a', 'b'), ...outdated('c', 'd').map((n) => n.labelled({ pool: 'fast' }))]);
    const plan = planAt(cluster, aPolicy({ minSecondsBetweenStarts: 600 }, { pools }));
    expect(started(plan)).toEqual(['a', 'c', 'd']);
    expect(annotationWrites(plan, 'c')[KEYS.lastStartTime]).toBeUndefined();
  });

  it('writes no pacing annotation while the pool does not pace', () => {
    const plan = planAt(aCluster(outdated('a', 'b')), aPolicy());
    expect(started(plan)).toEqual(['a', 'b']);
    expect(annotationWrites(plan, 'a')[KEYS.lastStartTime]).toBeUndefined();
  });
});

describe('soakSecondsAfterUpgrade', () => {
  const policy = aPolicy({ maxParallelUpgrades: 1, soakSecondsAfterUpgrade: 300 });
  const finishing = () => aNode('a').inState('uncordon-required').cordoned().annotated({ [KEYS.upgradeStartTime]: secondsAgo(900) });

  it('a node reaching upgrade-done records when, and keeps its parallel slot: none is handed on in the same pass', () => {
    const plan = planAt(aCluster([finishing(), ...outdated('b')]), policy);
    expect(annotationWrites(plan, 'a')[KEYS.upgradeDoneTime]).toBe(secondsAgo(0));
    expect(started(plan)).toEqual([]);
    expect(reasonOf(plan, 'b')?.code).toBe('upgrade-soak');
    expect(plan.nextWakeAt).toBe(NOW + 300_000);
  });

  it('a restart-only node done from pod-restart-required keeps the parallel slot it held', () => {
    const restarting = aNode('a').inState('pod-restart-required').annotated({ [KEYS.restartOnly]: 'true', [KEYS.upgradeStartTime]: secondsAgo(60), [KEYS.podRestartStartTime]: secondsAgo(60) });
    const plan = planAt(aCluster([restarting, ...outdated('b')]), policy);
    expect(annotationWrites(plan, 'a')[KEYS.upgradeDoneTime]).toBe(secondsAgo(0));
    expect(started(plan)).toEqual([]);
  });

  it('holds the next start while the soak lasts, wakes the planner at its end, and the next node starts then with nothing else changed', () => {
    const first = aCluster([finishing(), ...outdated('b')]);
    const soaking = stored(first, planAt(first, policy));
    const plan = planAt(soaking, policy, NOW + 1_000);
    expect(reasonOf(plan, 'b')).toMatchObject({
      code: 'upgrade-soak',
      message: 'pacing: upgraded nodes in pool default soak 300s before their slot is handed on (soakSecondsAfterUpgrade)',
      detail: 'pacing: 1 soaking and 0 upgrading of 1 parallel slots in pool default',
    });
    expect(plan.nextWakeAt).toBe(NOW + 300_000);
    expect(started(planAt(soaking, policy, NOW + 300_000))).toEqual(['b']);
  });

  it('a soaking node, uncordoned and Ready, holds no unavailable slot', () => {
    const soaking = aNode('a').inState('upgrade-done').annotated({ [KEYS.upgradeDoneTime]: secondsAgo(10) });
    const plan = planAt(aCluster([soaking, ...outdated('b')]), aPolicy({ maxParallelUpgrades: 2, maxUnavailable: 1, soakSecondsAfterUpgrade: 300 }));
    expect(started(plan)).toEqual(['b']);
  });

  it('holds nothing with maxParallelUpgrades 0: there is no parallel slot to keep', () => {
    const soaking = aNode('a').inState('upgrade-done').annotated({ [KEYS.upgradeDoneTime]: secondsAgo(10) });
    const plan = planAt(aCluster([soaking, ...outdated('b')]), aPolicy({ maxParallelUpgrades: 0, soakSecondsAfterUpgrade: 300 }));
    expect(started(plan)).toEqual(['b']);
  });

  it('a node done before the soak’s length ago, or done without an upgrade, does not soak', () => {
    const old = aNode('a').inState('upgrade-done').annotated({ [KEYS.upgradeDoneTime]: secondsAgo(301) });
    expect(started(planAt(aCluster([old, ...outdated('b')]), policy))).toEqual(['b']);
    const labelled = planAt(aCluster([aNode('a')]), policy);
    expect(annotationWrites(labelled, 'a')[KEYS.upgradeDoneTime]).toBeUndefined();
  });
});

describe('pacing in the order of holds', () => {
  it('pause and the failure budget come before pacing; pacing before no slot', () => {
    const recent = aNode('a').inState('drain-required').cordoned().annotated({ [KEYS.upgradeStartTime]: secondsAgo(10) });
    const cluster = aCluster([recent, ...outdated('b')]);
    expect(reasonOf(planAt(cluster, aPolicy({ minSecondsBetweenStarts: 60, autoUpgrade: false })), 'b')?.code).toBe('paused');
    const failed = aNode('f').inState('upgrade-failed').cordoned().driverFailing('CompileFailed', 'make exited with 2');
    expect(reasonOf(planAt(aCluster([recent, failed, ...outdated('b')]), aPolicy({ minSecondsBetweenStarts: 60 }, { maxFailedNodes: 1 })), 'b')?.code).toBe('halted');
    const full = planAt(cluster, aPolicy({ minSecondsBetweenStarts: 60, maxParallelUpgrades: 1 }));
    expect(reasonOf(full, 'b')?.code).toBe('start-delay');
    expect(full.nextWakeAt).toBe(NOW + 50_000);
  });
});
