import { describe, expect, it } from 'vitest';
import type { NodeAction } from '../../../../coordinator/plan/action.ts';
import { applyActions } from '../../../../coordinator/plan/apply-actions.ts';
import { groupNodeActions, nodePatchAgainst, nodePatchOf, type NodeAsRead } from '../../../../coordinator/plan/node-patch.ts';
import { CORDON_HOLDERS_ANNOTATION } from '../../../../shared/keys.ts';
import { KEYS, aCluster, aNode, aPod } from './fixtures.ts';

const GPU = 'nvidia.com/gpu';
const OFED = 'nvidia.com/ofed';
const schedulable: NodeAsRead = { name: 'n1', resourceVersion: '41', unschedulable: false, holders: undefined };
const setState: NodeAction = { kind: 'setState', node: 'n1', labelKey: KEYS.upgradeState, from: 'upgrade-done', to: 'upgrade-required', fromSince: null, upgradeStartedAt: null };

describe('nodePatchOf', () => {
  it('merges node-object actions into one merge patch, later actions winning, without the cordon and a resourceVersion', () => {
    expect(
      nodePatchOf([
        setState,
        { kind: 'setAnnotation', node: 'n1', key: 'a', value: '1' },
        { kind: 'removeAnnotation', node: 'n1', key: 'b' },
        { kind: 'setAnnotation', node: 'n1', key: 'b', value: '2' },
        { kind: 'clearSafeLoad', node: 'n1', key: KEYS.waitForSafeLoad },
        { kind: 'cordon', node: 'n1', holder: GPU },
      ]),
    ).toEqual({
      metadata: { labels: { [KEYS.upgradeState]: 'upgrade-required' }, annotations: { a: '1', b: '2', [KEYS.waitForSafeLoad]: null } },
    });
  });

  it('leaves out what does not change', () => {
    expect(nodePatchOf([])).toEqual({});
  });
});

describe('nodePatchAgainst: the cordon and its holders against the node as read, with its resourceVersion', () => {
  it('cordons a schedulable node, held by this driver', () => {
    expect(nodePatchAgainst([setState, { kind: 'cordon', node: 'n1', holder: GPU }], schedulable)).toEqual({
      metadata: { resourceVersion: '41', labels: { [KEYS.upgradeState]: 'upgrade-required' }, annotations: { [CORDON_HOLDERS_ANNOTATION]: GPU } },
      spec: { unschedulable: true },
    });
  });

  it('joins the holders of a node another driver holds, without touching the cordon', () => {
    expect(nodePatchAgainst([{ kind: 'cordon', node: 'n1', holder: GPU }], { ...schedulable, unschedulable: true, holders: OFED })).toEqual({
      metadata: { resourceVersion: '41', annotations: { [CORDON_HOLDERS_ANNOTATION]: `${GPU},${OFED}` } },
    });
  });

  it('cordons again a node uncordoned from outside whose holders still list this driver', () => {
    expect(nodePatchAgainst([{ kind: 'cordon', node: 'n1', holder: GPU }], { ...schedulable, holders: GPU })).toEqual({
      metadata: { resourceVersion: '41' },
      spec: { unschedulable: true },
    });
  });

  it('never takes over a cordon none of ours set: nothing changes but the precondition', () => {
    expect(nodePatchAgainst([{ kind: 'cordon', node: 'n1', holder: GPU }], { ...schedulable, unschedulable: true })).toEqual({ metadata: { resourceVersion: '41' } });
  });

  it('the last holder uncordons', () => {
    expect(nodePatchAgainst([{ kind: 'uncordon', node: 'n1', holder: GPU }], { ...schedulable, unschedulable: true, holders: GPU })).toEqual({
      metadata: { resourceVersion: '41', annotations: { [CORDON_HOLDERS_ANNOTATION]: null } },
      spec: { unschedulable: false },
    });
  });

  it('a holder that is not the last only leaves the list', () => {
    expect(nodePatchAgainst([{ kind: 'uncordon', node: 'n1', holder: GPU }], { ...schedulable, unschedulable: true, holders: `${GPU},${OFED}` })).toEqual({
      metadata: { resourceVersion: '41', annotations: { [CORDON_HOLDERS_ANNOTATION]: OFED } },
    });
  });

  it('an uncordon by a driver not listed leaves a cordon held by others alone', () => {
    expect(nodePatchAgainst([{ kind: 'uncordon', node: 'n1', holder: GPU }], { ...schedulable, unschedulable: true, holders: OFED })).toEqual({ metadata: { resourceVersion: '41' } });
    expect(nodePatchAgainst([{ kind: 'uncordon', node: 'n1', holder: GPU }], { ...schedulable, unschedulable: true, holders: '' })).toEqual({ metadata: { resourceVersion: '41' } });
  });
});

describe('groupNodeActions', () => {
  it('keeps order: runs of node-object actions, other actions alone', () => {
    const evict: NodeAction = { kind: 'evictPod', node: 'n1', pod: { namespace: 'ns', name: 'p', uid: 'u' } };
    const event: NodeAction = { kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message: 'm' };
    const cordon: NodeAction = { kind: 'cordon', node: 'n1', holder: GPU };
    expect(groupNodeActions([setState, cordon, event, evict, setState])).toEqual([[setState, cordon], event, evict, [setState]]);
  });
});

describe('applyActions', () => {
  it('replays node changes and marks deleted, evicted and restarted pods terminating', () => {
    const web = aPod('web').build();
    const job = aPod('job').build();
    const cluster = aCluster([aNode('n1').with(web, job), aNode('n2')]);
    const driver = cluster.nodes[0]?.driverPods[0];
    if (driver === undefined) throw new Error('fixture has a driver pod');
    const after = applyActions(cluster, [
      setState,
      { kind: 'cordon', node: 'n1', holder: GPU },
      { kind: 'setAnnotation', node: 'n1', key: 'k', value: 'v' },
      { kind: 'evictPod', node: 'n1', pod: web },
      { kind: 'deleteDriverPod', node: 'n1', pod: driver },
    ]);
    const n1 = after.nodes[0];
    expect(n1?.labels[KEYS.upgradeState]).toBe('upgrade-required');
    expect(n1?.unschedulable).toBe(true);
    expect(n1?.annotations.k).toBe('v');
    expect(n1?.pods.map((p) => [p.name, p.deleting])).toEqual([
      ['web', true],
      ['job', false],
    ]);
    expect(n1?.driverPods[0]?.deleting).toBe(true);
    expect(after.nodes[1]).toBe(cluster.nodes[1]);
    expect(cluster.nodes[0]?.unschedulable).toBe(false);
  });
});
