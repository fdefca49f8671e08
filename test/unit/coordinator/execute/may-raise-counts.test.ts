import { describe, expect, it } from 'vitest';
import { countedPrefix, mayRaiseCounts } from '../../../../coordinator/execute/may-raise-counts.ts';
import type { NodeAction } from '../../../../coordinator/plan/action.ts';
import { driverKeys, type UpgradeState } from '../../../../shared/keys.ts';

const keys = driverKeys('gpu');
const to = (from: UpgradeState, next: UpgradeState): NodeAction => ({ kind: 'setState', node: 'n1', labelKey: keys.upgradeState, from, to: next, fromSince: null, upgradeStartedAt: null });
const pod = { namespace: 'w', name: 'p', uid: 'u' };

describe('mayRaiseCounts: which node plans a pass must see carried out before it hands out slots', () => {
  it.each<[string, NodeAction[], boolean]>([
    ['a start: upgrade-required → cordon-required', [to('upgrade-required', 'cordon-required')], true],
    ['a restart-only start: upgrade-required → pod-restart-required', [to('upgrade-required', 'pod-restart-required')], true],
    ['a cordon of a node not upgrading', [{ kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }], true],
    // An upgrading node is out of service whether cordoned or not: its cordon changes no count.
    ['the cordon of a node in cordon-required', [{ kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }, to('cordon-required', 'wait-for-jobs-required')], false],
    ['a failure (maxFailedNodes counts it)', [to('drain-required', 'upgrade-failed')], true],
    ['another label (operand pausing; a pool selector might read it)', [{ kind: 'setLabel', node: 'n1', key: 'nvidia.com/gpu.deploy.dcgm', value: 'paused' }], true],
    ['an upgrading node moving on, with its driver pod deleted', [to('wait-for-jobs-required', 'pod-restart-required'), { kind: 'deleteDriverPod', node: 'n1', pod }], false],
    ['evictions during a drain', [{ kind: 'evictPod', node: 'n1', pod }], false],
    ['uncordon and upgrade-done', [to('pod-restart-required', 'uncordon-required'), { kind: 'uncordon', node: 'n1', holder: 'nvidia.com/gpu' }, to('uncordon-required', 'upgrade-done')], false],
    ['a node labelled upgrade-required while it waits for a slot', [to('upgrade-done', 'upgrade-required'), { kind: 'setAnnotation', node: 'n1', key: keys.upgradeReason, value: 'no slot' }], false],
    ['leaving upgrade-failed for a retry', [to('upgrade-failed', 'upgrade-required')], false],
    ['a reason and an Event', [{ kind: 'removeAnnotation', node: 'n1', key: keys.upgradeReason }, { kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message: 'x' }], false],
  ])('%s: %s', (_name, actions, expected) => {
    expect(mayRaiseCounts({ node: 'n1', actions })).toBe(expected);
  });
});

describe('countedPrefix: the leading actions (Events not counted) a pass waits for before the next may hand out slots', () => {
  const event: NodeAction = { kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message: 'x' };
  const annotate: NodeAction = { kind: 'setAnnotation', node: 'n1', key: keys.upgradeStartTime, value: '1' };
  it.each<[string, NodeAction[], number]>([
    // A start: stored cordon-required counts the node; its cordon and the next state follow beside the passes.
    ['a start with its cordon', [to('upgrade-done', 'upgrade-required'), to('upgrade-required', 'cordon-required'), annotate, event, { kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }, to('cordon-required', 'wait-for-jobs-required'), event], 2],
    ['a cordon, then a start (the node was not upgrading when cordoned)', [{ kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }, to('upgrade-required', 'cordon-required')], 2],
    ['a label after a state change', [to('pod-deletion-required', 'pod-restart-required'), { kind: 'setLabel', node: 'n1', key: 'nvidia.com/gpu.deploy.dcgm', value: 'paused' }, { kind: 'deleteDriverPod', node: 'n1', pod }], 2],
    ['a failure after a deletion', [{ kind: 'deletePod', node: 'n1', pod }, event, to('pod-restart-required', 'upgrade-failed')], 2],
    ['nothing that raises', [to('pod-restart-required', 'uncordon-required'), { kind: 'uncordon', node: 'n1', holder: 'nvidia.com/gpu' }, to('uncordon-required', 'upgrade-done')], 0],
  ])('%s', (_name, actions, expected) => {
    expect(countedPrefix({ node: 'n1', actions })).toBe(expected);
  });
});
