import { describe, expect, it } from 'vitest';
import { coalesceNodeActions } from '../../../../coordinator/execute/coalesce-node-actions.ts';
import type { NodeAction } from '../../../../coordinator/plan/action.ts';
import { driverKeys, type UpgradeState } from '../../../../shared/keys.ts';

const keys = driverKeys('gpu');
const state = (from: 'upgrade-required' | 'cordon-required', to: 'cordon-required' | 'wait-for-jobs-required'): NodeAction => ({
  kind: 'setState', node: 'n1', labelKey: keys.upgradeState, from, to, fromSince: null, upgradeStartedAt: null,
});
const event = (message: string): NodeAction => ({ kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message });
const cordon: NodeAction = { kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' };
const ann: NodeAction = { kind: 'setAnnotation', node: 'n1', key: keys.upgradeStartTime, value: '1' };
const del: NodeAction = { kind: 'deleteDriverPod', node: 'n1', pod: { namespace: 'd', name: 'p', uid: 'u' } };
const reason: NodeAction = { kind: 'setAnnotation', node: 'n1', key: keys.upgradeReason, value: 'waiting' };

describe('coalesceNodeActions', () => {
  it.each<[string, NodeAction[], unknown[]]>([
    ['two transitions in one pass: one patch, then both Events in order', [ann, state('upgrade-required', 'cordon-required'), event('a'), reason, state('cordon-required', 'wait-for-jobs-required'), event('b')], [[ann, state('upgrade-required', 'cordon-required'), reason, state('cordon-required', 'wait-for-jobs-required')], event('a'), event('b')]],
    ['a start’s cordon rides in the patch that stores cordon-required', [ann, state('upgrade-required', 'cordon-required'), event('a'), cordon], [[ann, state('upgrade-required', 'cordon-required'), cordon], event('a')]],
    ['a pod action is a boundary: the patch after it stays after it', [state('upgrade-required', 'cordon-required'), event('a'), del, reason], [[state('upgrade-required', 'cordon-required')], event('a'), del, [reason]]],
    ['Events before a pod action are sent before it', [event('w'), del], [event('w'), del]],
    ['nothing to group', [], []],
  ])('%s', (_name, actions, expected) => {
    expect(coalesceNodeActions(actions)).toEqual(expected);
  });

  describe('Events that report a state label', () => {
    const to = (from: UpgradeState, next: UpgradeState): NodeAction => ({ kind: 'setState', node: 'n1', labelKey: keys.upgradeState, from, to: next, fromSince: null, upgradeStartedAt: null });
    const stored = (s: UpgradeState): NodeAction => ({ kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message: `Successfully updated node state label to [${s}]`, reportsState: s });
    /** The stored state's Event as sent for a patch that passed several states: it names them all, in order. */
    const passing = (s: UpgradeState, path: string): NodeAction => ({ kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message: `Successfully updated node state label to [${s}]: ${path}`, reportsState: s });
    const skipping = (from: UpgradeState, next: UpgradeState, why: string): NodeAction => ({ kind: 'setState', node: 'n1', labelKey: keys.upgradeState, from, to: next, fromSince: null, upgradeStartedAt: null, skipped: why });
    const warning: NodeAction = { kind: 'emitEvent', node: 'n1', type: 'Warning', reason: 'GPUDriverUpgrade', message: 'gave up waiting' };

    it.each<[string, NodeAction[], unknown[]]>([
      [
        'a state entered and left within one patch is never stored: one Event, for the stored state, naming the path',
        [to('upgrade-done', 'upgrade-required'), stored('upgrade-required'), ann, to('upgrade-required', 'cordon-required'), stored('cordon-required')],
        [[to('upgrade-done', 'upgrade-required'), ann, to('upgrade-required', 'cordon-required')], passing('cordon-required', 'upgrade-done → upgrade-required → cordon-required')],
      ],
      [
        'uncordon-required on the way to upgrade-done: upgrade-done is reported, naming uncordon-required',
        [to('validation-required', 'uncordon-required'), stored('uncordon-required'), { kind: 'uncordon', node: 'n1', holder: 'nvidia.com/gpu' }, to('uncordon-required', 'upgrade-done'), stored('upgrade-done')],
        [[to('validation-required', 'uncordon-required'), { kind: 'uncordon', node: 'n1', holder: 'nvidia.com/gpu' }, to('uncordon-required', 'upgrade-done')], passing('upgrade-done', 'validation-required → uncordon-required → upgrade-done')],
      ],
      [
        'a start with its cordon: cordon-required is stored with the cordon and reported',
        [to('upgrade-required', 'cordon-required'), stored('cordon-required'), cordon],
        [[to('upgrade-required', 'cordon-required'), cordon], stored('cordon-required')],
      ],
      [
        'a pod action ends the patch: the state stored before it is reported',
        [to('drain-required', 'pod-restart-required'), stored('pod-restart-required'), del],
        [[to('drain-required', 'pod-restart-required')], stored('pod-restart-required'), del],
      ],
      [
        'other Events (Warnings) are always sent',
        [to('wait-for-jobs-required', 'pod-deletion-required'), stored('pod-deletion-required'), warning, to('pod-deletion-required', 'drain-required'), stored('drain-required')],
        [[to('wait-for-jobs-required', 'pod-deletion-required'), to('pod-deletion-required', 'drain-required')], warning, passing('drain-required', 'wait-for-jobs-required → pod-deletion-required → drain-required')],
      ],
      [
        'states skipped with nothing to do are named with why, the state stored before the patch first',
        [
          skipping('cordon-required', 'wait-for-jobs-required', 'already cordoned'),
          skipping('wait-for-jobs-required', 'pod-deletion-required', 'no job pods to wait for'),
          skipping('pod-deletion-required', 'pod-restart-required', 'no device pods to delete'),
          stored('pod-restart-required'),
          del,
        ],
        [
          [
            skipping('cordon-required', 'wait-for-jobs-required', 'already cordoned'),
            skipping('wait-for-jobs-required', 'pod-deletion-required', 'no job pods to wait for'),
            skipping('pod-deletion-required', 'pod-restart-required', 'no device pods to delete'),
          ],
          passing('pod-restart-required', 'cordon-required (already cordoned) → wait-for-jobs-required (no job pods to wait for) → pod-deletion-required (no device pods to delete) → pod-restart-required'),
          del,
        ],
      ],
    ])('%s', (_name, actions, expected) => {
      expect(coalesceNodeActions(actions)).toEqual(expected);
    });
  });

  it('keeps every action exactly once and pod actions in their order', () => {
    const actions = [ann, event('a'), del, state('upgrade-required', 'cordon-required'), event('b'), del, reason];
    const flat = coalesceNodeActions(actions).flatMap((g): readonly NodeAction[] => ('kind' in g ? [g] : g));
    expect(flat).toHaveLength(actions.length);
    expect(flat.filter((a) => a.kind === 'deleteDriverPod')).toHaveLength(2);
  });
});
