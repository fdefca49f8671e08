import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import { aCluster, aNode, annotationWrites, aPod, aPolicy, KEYS, NOW, planAt, reasonOf, secondsAgo, statesOf, type NodeBuilder } from './fixtures.ts';

const REVISION = 'gpu-driver=rev-new';
const CANARY = { [KEYS.canary]: REVISION };
const NAMES = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8'];
const pause = aPolicy({}, { canary: { nodes: 2 } });
const soak = aPolicy({}, { canary: { nodes: 2, then: 'Continue', soakSeconds: 60 } });

/** Eight nodes done on the old revision: a new one has just appeared. */
const waiting = (name: string): NodeBuilder => aNode(name).inState('upgrade-done').outdated();
/** A canary node of the new revision, upgrade-done `secondsAgo` ago. */
const doneCanary = (name: string, seconds = 10): NodeBuilder => aNode(name).inState('upgrade-done').annotated({ ...CANARY, [KEYS.stateStartTime]: secondsAgo(seconds) });
const withApproval = (cluster: ClusterSnapshot, revision: string): ClusterSnapshot => ({ ...cluster, rollout: { ...cluster.rollout, approval: { revision, by: 'alice' } } });
const started = (plan: ReturnType<typeof planAt>): string[] => NAMES.filter((n) => statesOf(plan, n).includes('cordon-required'));

describe('the canary of a new revision', () => {
  it('marks the first two nodes in start order (idle device first) and starts only them; the rest wait naming them', () => {
    const busy = (name: string) => waiting(name).with(aPod(`${name}-job`).requesting('nvidia.com/gpu'));
    const plan = planAt(aCluster([busy('n1'), busy('n2'), waiting('n3'), busy('n4'), waiting('n5'), busy('n6'), busy('n7'), busy('n8')]), pause);
    expect(started(plan)).toEqual(['n3', 'n5']);
    expect(annotationWrites(plan, 'n3')[KEYS.canary]).toBe(REVISION);
    expect(annotationWrites(plan, 'n5')[KEYS.canary]).toBe(REVISION);
    expect(annotationWrites(plan, 'n1')[KEYS.canary]).toBeUndefined();
    expect(reasonOf(plan, 'n1')).toMatchObject({ code: 'canary', message: `waiting for canary nodes n3, n5 of revision ${REVISION}, then approval` });
    expect(plan.status.canary).toMatchObject({ revision: REVISION, phase: 'Canary', nodes: ['n3', 'n5'], approvedBy: null });
  });

  it('keeps the set recorded on the nodes (a restarted coordinator chooses nothing anew), whatever the order says now', () => {
    const plan = planAt(aCluster([waiting('n1'), waiting('n2'), aNode('n7').inState('upgrade-required').outdated().annotated(CANARY), aNode('n8').inState('pod-restart-required').cordoned().outdated().annotated(CANARY)]), pause);
    expect(started(plan)).toEqual(['n7']);
    expect(plan.status.canary?.nodes).toEqual(['n7', 'n8']);
    expect(reasonOf(plan, 'n1')?.message).toContain('canary nodes n7, n8');
  });

  it('chooses only among the nodes canary.selector picks', () => {
    const policy = aPolicy({}, { canary: { nodes: '25%', selector: { matchLabels: { canary: 'yes' } } } });
    const plan = planAt(aCluster(NAMES.map((n) => (n === 'n6' ? waiting(n).labelled({ canary: 'yes' }) : waiting(n)))), policy);
    expect(started(plan)).toEqual(['n6']);
  });

  it('waits for approval once the canary is done, and only an approval of this revision lets the rest go', () => {
    const cluster = aCluster([doneCanary('n1'), doneCanary('n2'), waiting('n3'), waiting('n4')]);
    const held = planAt(cluster, pause);
    expect(started(held)).toEqual([]);
    expect(reasonOf(held, 'n3')).toMatchObject({ code: 'waiting-for-approval', message: `waiting for approval of canary nodes n1, n2 (revision ${REVISION}): kubectl driver-rollout approve` });
    expect(held.status.canary?.phase).toBe('WaitingForApproval');
    expect(held.nextWakeAt).toBeNull();

    const otherRevision = planAt(withApproval(cluster, 'gpu-driver=rev-old'), pause);
    expect(started(otherRevision)).toEqual([]);

    const approved = planAt(withApproval(cluster, REVISION), pause);
    expect(started(approved)).toEqual(['n3', 'n4']);
    expect(approved.status.canary).toMatchObject({ phase: 'Rolling', approvedBy: 'alice' });
    expect(approved.status.conditions.find((c) => c.type === 'CanaryApproved')).toMatchObject({ status: 'True', message: expect.stringContaining('approved by alice') as unknown });
  });

  it('says Rolling, not waiting, when the canary was every node to upgrade', () => {
    const plan = planAt(aCluster([doneCanary('n1'), doneCanary('n2'), aNode('n3').inState('upgrade-done')]), pause);
    expect(plan.status.canary?.phase).toBe('Rolling');
    expect(plan.status.canary?.approvedBy).toBeNull();
  });

  it('with then: Continue soaks, wakes at the soak’s end, and then lets the rest go with nothing else changed', () => {
    const cluster = aCluster([doneCanary('n1', 30), doneCanary('n2', 10), waiting('n3')]);
    const soaking = planAt(cluster, soak);
    expect(started(soaking)).toEqual([]);
    const end = (Math.floor(NOW / 1000) - 10) * 1000 + 60_000;
    expect(soaking.status.canary).toMatchObject({ phase: 'Soaking', soakUntil: end });
    expect(reasonOf(soaking, 'n3')).toMatchObject({ code: 'canary-soaking', detail: expect.stringMatching(/: 50s left$/) as unknown });
    expect(soaking.nextWakeAt).toBe(end);

    const atTheEnd = planAt(cluster, soak, end);
    expect(started(atTheEnd)).toEqual(['n3']);
    expect(atTheEnd.status.canary?.phase).toBe('Rolling');
  });

  it('does not end the soak while a canary node is cordoned', () => {
    const plan = planAt(aCluster([doneCanary('n1', 300).cordoned(), doneCanary('n2', 300), waiting('n3')]), soak);
    expect(started(plan)).toEqual([]);
    expect(reasonOf(plan, 'n3')?.message).toContain('canary node n1 cordoned');
  });
});

describe('a failed canary', () => {
  it.each([
    ['goes NotReady while it soaks', doneCanary('n1').notReady(5), /canary node n1 went NotReady after its upgrade \(Ready Unknown: NodeStatusUnknown\)/],
    ['loses its driver pod’s Ready while it soaks', doneCanary('n1').driverNotReady(), /the driver pod of canary node n1 stopped being Ready/],
    ['fails its upgrade', aNode('n1').inState('upgrade-failed').cordoned().driverNotReady().annotated({ ...CANARY, [KEYS.upgradeReason]: 'no Ready driver pod 900s after the restart began' }), /canary node n1 failed: no Ready driver pod 900s/],
  ])('a canary node that %s halts the rollout for good, naming why', (_what, node, why) => {
    const plan = planAt(aCluster([node, doneCanary('n2'), waiting('n3')]), soak);
    expect(started(plan)).toEqual([]);
    expect(plan.status.canary?.phase).toBe('CanaryFailed');
    expect(reasonOf(plan, 'n3')).toMatchObject({ code: 'canary-failed', message: expect.stringMatching(why) as unknown });
    const recorded = annotationWrites(plan, 'n1')[KEYS.canaryFailed];
    expect(recorded).toMatch(why);
    // Recorded on the node: once it is fine again (and the soak long over) the canary stays failed.
    const later = planAt(aCluster([doneCanary('n1', 3600).annotated({ [KEYS.canaryFailed]: recorded ?? '' }), doneCanary('n2', 3600), waiting('n3')]), soak);
    expect(later.status.canary?.phase).toBe('CanaryFailed');
    expect(started(later)).toEqual([]);
  });

  it('an upgrading canary node that is NotReady does not fail the canary by itself (the node’s own NotReady timeout does)', () => {
    const plan = planAt(aCluster([aNode('n1').inState('drain-required').cordoned().outdated().notReady(5).annotated(CANARY), doneCanary('n2'), waiting('n3')]), soak);
    expect(plan.status.canary?.phase).toBe('Canary');
  });

  it('with onCanaryFailure Rollback asks to put the previous revision back; Halt does not', () => {
    const failed = aNode('n1').inState('upgrade-failed').cordoned().driverNotReady().annotated({ ...CANARY, [KEYS.canaryFailed]: 'canary node n1 failed: boom' });
    const cluster: ClusterSnapshot = { ...aCluster([failed, waiting('n2')]), daemonSets: [{ namespace: 'gpu-operator', name: 'gpu-driver', updatedRevisionHash: 'rev-new', previousRevisionHash: 'rev-old' }] };
    const rollback = planAt(cluster, aPolicy({}, { canary: { nodes: 1 }, onCanaryFailure: 'Rollback' }));
    expect(rollback.rollback).toEqual({ daemonSets: [{ name: 'gpu-driver', fromRevisionHash: 'rev-new', toRevisionHash: 'rev-old' }], reason: 'canary node n1 failed: boom' });
    expect(reasonOf(rollback, 'n2')?.message).toBe('halted: canary failed: canary node n1 failed: boom; rolling back gpu-driver: rev-new → rev-old');
    expect(rollback.status.conditions.find((c) => c.type === 'CanaryFailed')).toMatchObject({ status: 'True', reason: 'RollingBack' });
    expect(planAt(cluster, aPolicy({}, { canary: { nodes: 1 } })).rollback).toBeNull();
  });

  it('an approval of the failed revision lets the rest go all the same', () => {
    const failed = aNode('n1').inState('upgrade-failed').cordoned().driverNotReady().annotated({ ...CANARY, [KEYS.canaryFailed]: 'canary node n1 failed: boom' });
    const plan = planAt(withApproval(aCluster([failed, waiting('n2')]), REVISION), aPolicy({}, { canary: { nodes: 1 } }));
    expect(started(plan)).toEqual(['n2']);
  });
});

describe('a revision the nodes ran before (a rollback)', () => {
  it('gets no canary: the old canary’s marks are dropped and its nodes go back within the limits', () => {
    // After the undo: the old template's revision is newest again; the canary nodes run the failed one.
    const failedCanary = { [KEYS.canary]: 'gpu-driver=rev-bad', [KEYS.canaryFailed]: 'canary node n1 failed: boom' };
    const cluster: ClusterSnapshot = {
      ...aCluster([aNode('n1').inState('upgrade-done').outdated().annotated(failedCanary), aNode('n2').inState('upgrade-done')]),
      daemonSets: [{ namespace: 'gpu-operator', name: 'gpu-driver', updatedRevisionHash: 'rev-new', previousRevisionHash: 'rev-bad', newestIsRollback: true }],
    };
    const plan = planAt(cluster, pause);
    expect(plan.status.canary).toBeNull();
    expect(statesOf(plan, 'n1')).toContain('cordon-required');
    expect(annotationWrites(plan, 'n1')).toMatchObject({ [KEYS.canary]: null, [KEYS.canaryFailed]: null });
  });

  it('a failed revision pushed again after its rollback, which no node runs, is canaried afresh', () => {
    const cluster: ClusterSnapshot = {
      ...aCluster([waiting('n1'), waiting('n2'), waiting('n3')]),
      daemonSets: [{ namespace: 'gpu-operator', name: 'gpu-driver', updatedRevisionHash: 'rev-new', previousRevisionHash: 'rev-old', newestIsRollback: true }],
    };
    expect(started(planAt(cluster, aPolicy({}, { canary: { nodes: 1 } })))).toEqual(['n1']);
  });
});

describe('the canary among the other start checks', () => {
  it('pause and the failure budget are named before the canary; no slot after it', () => {
    const cluster = aCluster([doneCanary('n1'), doneCanary('n2'), waiting('n3')]);
    expect(reasonOf(planAt(cluster, aPolicy({ autoUpgrade: false }, { canary: { nodes: 2 } })), 'n3')?.code).toBe('paused');
    const full = aPolicy({ maxUnavailable: 0 }, { canary: { nodes: 2 } });
    expect(reasonOf(planAt(cluster, full), 'n3')?.code).toBe('waiting-for-approval');
  });

  it('no canary configured: nothing marked, no canary in the status', () => {
    const plan = planAt(aCluster([waiting('n1'), waiting('n2')]), aPolicy());
    expect(started(plan)).toEqual(['n1', 'n2']);
    expect(plan.status.canary).toBeUndefined();
    expect(annotationWrites(plan, 'n1')[KEYS.canary]).toBeUndefined();
  });
});
