import { describe, expect, it } from 'vitest';
import { mayRaiseCounts } from '../../../../coordinator/execute/may-raise-counts.ts';
import type { NodeAction } from '../../../../coordinator/plan/action.ts';
import { driverKeys, type UpgradeState } from '../../../../shared/keys.ts';

const keys = driverKeys('gpu');
const to = (from: UpgradeState, next: UpgradeState): NodeAction => ({ kind: 'setState', node: 'n1', labelKey: keys.upgradeState, from, to: next, fromSince: null, upgradeStartedAt: null });
const pod = { namespace: 'w', name: 'p', uid: 'u' };

describe('mayRaiseCounts: which node plans a pass must see carried out before it hands out slots', () => {
  it.each<[string, NodeAction[], boolean]>([
    ['a start: upgrade-required → cordon-required', [to('upgrade-required', 'cordon-required')], true],
    ['a restart-only start: upgrade-required → pod-restart-required', [to('upgrade-required', 'pod-restart-required')], true],
    ['a cordon', [{ kind: 'cordon', node: 'n1' }, to('cordon-required', 'wait-for-jobs-required')], true],
    ['a failure (maxFailedNodes counts it)', [to('drain-required', 'upgrade-failed')], true],
    ['another label (operand pausing; a pool selector might read it)', [{ kind: 'setLabel', node: 'n1', key: 'nvidia.com/gpu.deploy.dcgm', value: 'paused' }], true],
    ['an upgrading node moving on, with its driver pod deleted', [to('wait-for-jobs-required', 'pod-restart-required'), { kind: 'deleteDriverPod', node: 'n1', pod }], false],
    ['evictions during a drain', [{ kind: 'evictPod', node: 'n1', pod }], false],
    ['uncordon and upgrade-done', [to('pod-restart-required', 'uncordon-required'), { kind: 'uncordon', node: 'n1' }, to('uncordon-required', 'upgrade-done')], false],
    ['a node labelled upgrade-required while it waits for a slot', [to('upgrade-done', 'upgrade-required'), { kind: 'setAnnotation', node: 'n1', key: keys.upgradeReason, value: 'no slot' }], false],
    ['leaving upgrade-failed for a retry', [to('upgrade-failed', 'upgrade-required')], false],
    ['a reason and an Event', [{ kind: 'removeAnnotation', node: 'n1', key: keys.upgradeReason }, { kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message: 'x' }], false],
  ])('%s: %s', (_name, actions, expected) => {
    expect(mayRaiseCounts({ node: 'n1', actions })).toBe(expected);
  });
});
