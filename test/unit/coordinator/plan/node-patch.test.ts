import { describe, expect, it } from 'vitest';
import type { NodeAction } from '../../../../coordinator/plan/action.ts';
import { applyActions } from '../../../../coordinator/plan/apply-actions.ts';
import { groupNodeActions, nodePatchOf } from '../../../../coordinator/plan/node-patch.ts';
import { KEYS, aCluster, aNode, aPod } from './fixtures.ts';

const setState: NodeAction = { kind: 'setState', node: 'n1', labelKey: KEYS.upgradeState, from: 'upgrade-done', to: 'upgrade-required', fromSince: null, upgradeStartedAt: null };

describe('nodePatchOf', () => {
  it('merges node-object actions into one merge patch, later actions winning', () => {
    expect(
      nodePatchOf([
        setState,
        { kind: 'setAnnotation', node: 'n1', key: 'a', value: '1' },
        { kind: 'cordon', node: 'n1' },
        { kind: 'removeAnnotation', node: 'n1', key: 'b' },
        { kind: 'setAnnotation', node: 'n1', key: 'b', value: '2' },
        { kind: 'clearSafeLoad', node: 'n1', key: KEYS.waitForSafeLoad },
        { kind: 'uncordon', node: 'n1' },
      ]),
    ).toEqual({
      metadata: { labels: { [KEYS.upgradeState]: 'upgrade-required' }, annotations: { a: '1', b: '2', [KEYS.waitForSafeLoad]: null } },
      spec: { unschedulable: false },
    });
  });

  it('leaves out what does not change', () => {
    expect(nodePatchOf([{ kind: 'cordon', node: 'n1' }])).toEqual({ spec: { unschedulable: true } });
    expect(nodePatchOf([])).toEqual({});
  });
});

describe('groupNodeActions', () => {
  it('keeps order: runs of node-object actions, other actions alone', () => {
    const evict: NodeAction = { kind: 'evictPod', node: 'n1', pod: { namespace: 'ns', name: 'p', uid: 'u' } };
    const event: NodeAction = { kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message: 'm' };
    const cordon: NodeAction = { kind: 'cordon', node: 'n1' };
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
      { kind: 'cordon', node: 'n1' },
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
