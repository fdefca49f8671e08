/**
 * A cluster-wide blip (coordinator/plan/pool-disruption.ts, start-checks.ts, node-not-ready.ts):
 * a NotReady node does not start; a pool with at least 3 nodes and 20 % of its nodes NotReady at
 * once starts none, and NotReady time fails none of its nodes until it is healthy again, then
 * counts from then; a lone NotReady node mid-upgrade still fails after its limit.
 */
import { describe, expect, it } from 'vitest';
import { DISRUPTED_MIN_NODES, DISRUPTED_SHARE_PERCENT, isDisrupted } from '../../../../coordinator/plan/pool-disruption.ts';
import { KEYS, NOW, aCluster, aNode, aPolicy, actionsOf, annotationWrites, planAt, reasonOf, statesOf, type NodeBuilder } from './fixtures.ts';

const FAIL_AFTER_30 = { maxUnavailable: '100%', maxParallelUpgrades: 0, podRestart: { timeoutSeconds: 600, failAfterSeconds: 30 } } as const;
const policy = aPolicy(FAIL_AFTER_30);
const pending = (name: string): NodeBuilder => aNode(name).inState('upgrade-required').outdated();
const done = (name: string): NodeBuilder => aNode(name).inState('upgrade-done');
/** n1 in pod-restart-required, NotReady for `seconds`. */
const restartingNotReady = (seconds: number): NodeBuilder => aNode('n1').inState('pod-restart-required').heldBy('nvidia.com/gpu').notReady(seconds);
const unixSeconds = (ms: number): string => String(Math.floor(ms / 1000));

describe('a disrupted pool: at least DISRUPTED_MIN_NODES NotReady and DISRUPTED_SHARE_PERCENT of the pool', () => {
  it.each([
    [2, 2, false],
    [3, 15, true],
    [3, 16, false],
    [100, 500, true],
    [99, 500, false],
  ])('%i of %i NotReady: disrupted %s', (notReady, total, disrupted) => {
    expect([DISRUPTED_MIN_NODES, DISRUPTED_SHARE_PERCENT]).toEqual([3, 20]);
    expect(isDisrupted(notReady, total)).toBe(disrupted);
  });
});

describe('a NotReady node does not start', () => {
  it('waits in upgrade-required, its reason naming the condition, and takes no slot', () => {
    const plan = planAt(aCluster([pending('n1').notReady(10), pending('n2')]), aPolicy({ maxUnavailable: 2, maxParallelUpgrades: 0 }));
    expect(statesOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')).toMatchObject({
      code: 'node-not-ready',
      message: 'not started: node NotReady (Ready Unknown: NodeStatusUnknown: Kubelet stopped posting node status.); starts once it is Ready again',
    });
    expect(statesOf(plan, 'n2')[0]).toBe('cordon-required');
  });

  it('starts once Ready again', () => {
    expect(statesOf(planAt(aCluster([pending('n1')]), policy), 'n1')[0]).toBe('cordon-required');
  });
});

describe('a third of a pool NotReady at once', () => {
  /** 9 nodes: 3 NotReady (a third), `n1` among them when given. */
  const cluster = (n1: NodeBuilder, ready = 'x') =>
    aCluster([n1, aNode('d1').inState('upgrade-done').notReady(60), aNode('d2').inState('upgrade-done').notReady(60), pending(`${ready}1`), pending(`${ready}2`), done('d3'), done('d4'), done('d5'), done('d6')]);

  it('holds every start of the pool, Ready nodes too, naming the disruption', () => {
    const plan = planAt(cluster(done('n1').notReady(60)), policy);
    expect(plan.nodePlans.flatMap((p) => statesOf(plan, p.node))).toEqual([]);
    expect(reasonOf(plan, 'x1')).toMatchObject({
      code: 'pool-not-ready',
      message: 'not started: pool default has 3 of 9 nodes NotReady (a disruption: at least 3 nodes and 20% of the pool); starts resume once the pool is healthy again',
    });
  });

  it('fails no node for its NotReady time, however long: it is held, marked frozen once, with no timer', () => {
    const plan = planAt(cluster(restartingNotReady(3600)), policy);
    expect(statesOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')?.message).toMatch(/held in pod-restart-required until it is Ready again; pool default has 3 of 9 nodes NotReady .*: its NotReady time fails nothing until the pool is healthy$/);
    expect(annotationWrites(plan, 'n1')).toEqual({ [KEYS.notReadyFrozen]: unixSeconds(NOW), [KEYS.upgradeReason]: reasonOf(plan, 'n1')?.message });
    expect(plan.nextWakeAt).toBeNull();
    const again = planAt(cluster(restartingNotReady(3600).annotated({ [KEYS.notReadyFrozen]: unixSeconds(NOW - 60_000) })), policy);
    expect(actionsOf(again, 'n1').filter((a) => a.kind === 'setAnnotation' && a.key === KEYS.notReadyFrozen)).toEqual([]);
  });

  it('once the pool is healthy again, a node still NotReady counts its NotReady time from then, not from its lastTransitionTime', () => {
    const thawed = aNode('n1').inState('pod-restart-required').heldBy('nvidia.com/gpu').notReady(3600).annotated({ [KEYS.notReadyFrozen]: unixSeconds(NOW - 600_000) });
    const plan = planAt(aCluster([thawed, pending('x1'), done('d3')]), policy);
    expect(statesOf(plan, 'n1')).toEqual([]);
    expect(annotationWrites(plan, 'n1')).toMatchObject({ [KEYS.notReadyCountedFrom]: unixSeconds(NOW), [KEYS.notReadyFrozen]: null });
    expect(reasonOf(plan, 'n1')?.detail).toMatch(/\(0s of 30s NotReady\)$/);
    expect(plan.nextWakeAt).toBe(NOW + 30_000);
    // 31 s later, still NotReady: it fails, as a lone NotReady node does.
    const counting = aNode('n1').inState('pod-restart-required').heldBy('nvidia.com/gpu').notReady(3631).annotated({ [KEYS.notReadyCountedFrom]: unixSeconds(NOW - 31_000) });
    expect(statesOf(planAt(aCluster([counting, done('d3')]), policy), 'n1')).toEqual(['upgrade-failed']);
  });

  it('a freeze from an earlier NotReady spell does not count: NotReady again later counts from its own lastTransitionTime', () => {
    const stale = restartingNotReady(40).annotated({ [KEYS.notReadyFrozen]: unixSeconds(NOW - 3_600_000) });
    expect(statesOf(planAt(aCluster([stale, done('d3')]), policy), 'n1')).toEqual(['upgrade-failed']);
  });
});

describe('a lone NotReady node mid-upgrade', () => {
  it('still fails after its limit (1 of 9 NotReady is no disruption)', () => {
    const plan = planAt(aCluster([restartingNotReady(31), done('d1'), done('d2'), done('d3'), done('d4'), done('d5'), done('d6'), done('d7'), done('d8')]), policy);
    expect(statesOf(plan, 'n1')).toEqual(['upgrade-failed']);
  });

  it('two NotReady in a pool of three is no disruption either (fewer than 3 nodes): both fail after the limit', () => {
    const second = aNode('n2').inState('validation-required').heldBy('nvidia.com/gpu').notReady(31);
    const plan = planAt(aCluster([restartingNotReady(31), second, done('d1')]), policy);
    expect([statesOf(plan, 'n1'), statesOf(plan, 'n2')]).toEqual([['upgrade-failed'], ['upgrade-failed']]);
  });
});
