import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { NodeAction, NodeObjectAction } from '../../../../coordinator/plan/action.ts';
import { applyActions } from '../../../../coordinator/plan/apply-actions.ts';
import { groupNodeActions, guardedNodePatch, nodePatchOf, type NodeAsRead } from '../../../../coordinator/plan/node-patch.ts';
import { CORDON_HOLDERS_ANNOTATION } from '../../../../shared/keys.ts';
import { applyJsonPatch } from '../../../doubles/apply-json-patch.ts';
import { KEYS, aCluster, aNode, aPod } from './fixtures.ts';

const GPU = 'nvidia.com/gpu';
const OFED = 'nvidia.com/ofed';
const setState: NodeObjectAction = { kind: 'setState', node: 'n1', labelKey: KEYS.upgradeState, from: 'upgrade-done', to: 'upgrade-required', fromSince: null, upgradeStartedAt: null };
const STATE_TOKEN = KEYS.upgradeState.replace('/', '~1');
const HOLDERS_TOKEN = CORDON_HOLDERS_ANNOTATION.replace('/', '~1');
const schedulable: NodeAsRead = { name: 'n1', unschedulable: undefined, labels: { [KEYS.upgradeState]: 'upgrade-done' }, annotations: {}, readyAt: undefined };
const ready: NodeAsRead = { ...schedulable, readyAt: 0 };
/** Cordoned, its holders annotation `holders`. */
const held = (holders: string): NodeAsRead => ({ ...schedulable, unschedulable: true, annotations: { [CORDON_HOLDERS_ANNOTATION]: holders } });

/** A Node object with exactly the fields of `read`. */
function nodeOf(read: NodeAsRead): V1Node {
  return {
    metadata: { name: read.name, ...(read.labels === undefined ? {} : { labels: { ...read.labels } }), ...(read.annotations === undefined ? {} : { annotations: { ...read.annotations } }) },
    spec: read.unschedulable === undefined ? {} : { unschedulable: read.unschedulable },
    status: read.readyAt === undefined ? {} : { conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

/** The cordon and its holders after the patch made against `read` is applied to that node. */
function afterPatch(actions: readonly NodeObjectAction[], read: NodeAsRead): { unschedulable: boolean; holders: string | undefined } {
  const result = applyJsonPatch(nodeOf(read), guardedNodePatch(actions, read));
  if (!('patched' in result)) throw new Error(`refused at ${JSON.stringify(result.failed)}`);
  return { unschedulable: result.patched.spec?.unschedulable === true, holders: result.patched.metadata?.annotations?.[CORDON_HOLDERS_ANNOTATION] };
}

describe('nodePatchOf', () => {
  it('merges node-object actions into one merge patch, later actions winning, without the cordon', () => {
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

describe('guardedNodePatch: the cordon and its holders made against the node as read, guarded by what they were made from', () => {
  it('cordons a schedulable node, held by this driver, once the cordon, the holders and the state label are as read', () => {
    expect(guardedNodePatch([setState, { kind: 'cordon', node: 'n1', holder: GPU }], schedulable)).toEqual([
      { op: 'test', path: '/spec/unschedulable', value: null },
      { op: 'test', path: `/metadata/labels/${STATE_TOKEN}`, value: 'upgrade-done' },
      { op: 'add', path: `/metadata/labels/${STATE_TOKEN}`, value: 'upgrade-required' },
      { op: 'test', path: `/metadata/annotations/${HOLDERS_TOKEN}`, value: null },
      { op: 'add', path: `/metadata/annotations/${HOLDERS_TOKEN}`, value: GPU },
      { op: 'add', path: '/spec/unschedulable', value: true },
    ]);
  });

  it('joins the holders of a node another driver holds, without touching the cordon', () => {
    expect(afterPatch([{ kind: 'cordon', node: 'n1', holder: GPU }], held(OFED))).toEqual({ unschedulable: true, holders: `${GPU},${OFED}` });
  });

  it('cordons again a node uncordoned from outside whose holders still list this driver', () => {
    expect(afterPatch([{ kind: 'cordon', node: 'n1', holder: GPU }], { ...schedulable, annotations: { [CORDON_HOLDERS_ANNOTATION]: GPU } })).toEqual({ unschedulable: true, holders: GPU });
  });

  it('never takes over a cordon none of ours set: nothing but the guard', () => {
    const adminCordon: NodeAsRead = { ...schedulable, unschedulable: true };
    expect(guardedNodePatch([{ kind: 'cordon', node: 'n1', holder: GPU }], adminCordon).every((op) => op.op === 'test')).toBe(true);
  });

  it('the last holder uncordons', () => {
    expect(afterPatch([{ kind: 'uncordon', node: 'n1', holder: GPU }], held(GPU))).toEqual({ unschedulable: false, holders: undefined });
  });

  it('a holder that is not the last only leaves the list', () => {
    expect(afterPatch([{ kind: 'uncordon', node: 'n1', holder: GPU }], held(`${GPU},${OFED}`))).toEqual({ unschedulable: true, holders: OFED });
  });

  it('an uncordon by a driver not listed leaves a cordon held by others alone', () => {
    expect(afterPatch([{ kind: 'uncordon', node: 'n1', holder: GPU }], held(OFED))).toEqual({ unschedulable: true, holders: OFED });
    expect(afterPatch([{ kind: 'uncordon', node: 'n1', holder: GPU }], held(''))).toEqual({ unschedulable: true, holders: '' });
  });

  it('is refused once the node\'s cordon, its holders or a key it writes changed since it was read', () => {
    const cordon: NodeAction[] = [setState, { kind: 'cordon', node: 'n1', holder: GPU }];
    const patch = guardedNodePatch(cordon as NodeObjectAction[], schedulable);
    const changedSince: Record<string, (n: V1Node) => void> = {
      'cordoned by an admin': (n) => { (n.spec ??= {}).unschedulable = true; },
      'cordoned and held by another driver': (n) => { (n.spec ??= {}).unschedulable = true; (n.metadata ??= {}).annotations = { [CORDON_HOLDERS_ANNOTATION]: OFED }; },
      'its state label written by someone else': (n) => { (n.metadata ??= {}).labels = { [KEYS.upgradeState]: 'upgrade-failed' }; },
    };
    for (const [what, change] of Object.entries(changedSince)) {
      const now = nodeOf(schedulable);
      change(now);
      expect(applyJsonPatch(now, patch), what).toHaveProperty('failed');
    }
  });

  it('is applied over other writers\' changes of other fields: NFD\'s and GFD\'s labels, a heartbeat', () => {
    const patch = guardedNodePatch([setState, { kind: 'cordon', node: 'n1', holder: GPU }], ready);
    const now = nodeOf(ready);
    const metadata = (now.metadata ??= {});
    metadata.labels = { ...metadata.labels, 'feature.node.kubernetes.io/kernel-version.revision': '7', 'nvidia.com/gfd.timestamp': '1795000000' };
    metadata.resourceVersion = '99';
    now.status = { conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: new Date('2026-11-27T17:00:00Z') }] };
    const result = applyJsonPatch(now, patch);
    if (!('patched' in result)) throw new Error(`refused at ${JSON.stringify(result.failed)}`);
    expect(result.patched.spec?.unschedulable).toBe(true);
    expect(result.patched.metadata?.labels?.['nvidia.com/gfd.timestamp']).toBe('1795000000');
  });

  it('a start is refused once its node turned NotReady since it was read; other writes do not test readiness', () => {
    const waiting: NodeAsRead = { ...ready, labels: { [KEYS.upgradeState]: 'upgrade-required' } };
    const start = guardedNodePatch([{ ...setState, from: 'upgrade-required', to: 'cordon-required' }, { kind: 'cordon', node: 'n1', holder: GPU }], waiting);
    expect(applyJsonPatch(nodeOf(waiting), start)).toHaveProperty('patched');
    const notReadyNow = nodeOf(waiting);
    notReadyNow.status = { conditions: [{ type: 'Ready', status: 'Unknown' }] };
    expect(applyJsonPatch(notReadyNow, start)).toHaveProperty('failed');
    const uncordon = guardedNodePatch([{ kind: 'uncordon', node: 'n1', holder: GPU }], { ...held(GPU), readyAt: 0 });
    expect(uncordon.some((op) => op.path.startsWith('/status'))).toBe(false);
  });

  it('writes a node that has no labels or annotations at all, and is refused if it got some since', () => {
    const bare: NodeAsRead = { name: 'n1', unschedulable: undefined, labels: undefined, annotations: undefined, readyAt: undefined };
    const patch = guardedNodePatch([setState, { kind: 'cordon', node: 'n1', holder: GPU }], bare);
    const result = applyJsonPatch(nodeOf(bare), patch);
    if (!('patched' in result)) throw new Error(`refused at ${JSON.stringify(result.failed)}`);
    expect(result.patched.metadata?.annotations).toEqual({ [CORDON_HOLDERS_ANNOTATION]: GPU });
    expect(result.patched.metadata?.labels).toEqual({ [KEYS.upgradeState]: 'upgrade-required' });
    const annotatedSince = nodeOf(bare);
    (annotatedSince.metadata ??= {}).annotations = { [CORDON_HOLDERS_ANNOTATION]: OFED };
    expect(applyJsonPatch(annotatedSince, patch)).toHaveProperty('failed');
  });

  it('removes a key only where it was read, so a key already gone does not refuse the patch', () => {
    const patch = guardedNodePatch([{ kind: 'clearSafeLoad', node: 'n1', key: KEYS.waitForSafeLoad }, { kind: 'uncordon', node: 'n1', holder: GPU }], held(GPU));
    expect(patch.filter((op) => op.op === 'remove').map((op) => op.path)).toEqual([`/metadata/annotations/${HOLDERS_TOKEN}`]);
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
