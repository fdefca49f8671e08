import { describe, expect, it } from 'vitest';
import { coalesceNodeActions } from '../../../../coordinator/execute/coalesce-node-actions.ts';
import { driverDeletionBeside } from '../../../../coordinator/execute/driver-deletion-beside.ts';
import type { NodeAction, SetStateAction } from '../../../../coordinator/plan/action.ts';
import { driverKeys } from '../../../../shared/keys.ts';

const keys = driverKeys('gpu');
const setState = (from: SetStateAction['from'], to: SetStateAction['to']): SetStateAction => ({
  kind: 'setState', node: 'n1', labelKey: keys.upgradeState, from, to, fromSince: null, upgradeStartedAt: null,
});
const stateEvent = (state: SetStateAction['to']): NodeAction => ({
  kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'GPUDriverUpgrade', message: `Successfully updated node state label to [${state}]`, reportsState: state,
});
const timer: NodeAction = { kind: 'setAnnotation', node: 'n1', key: keys.podRestartStartTime, value: '1700000000' };
const deleteDriver: NodeAction = { kind: 'deleteDriverPod', node: 'n1', pod: { namespace: 'gpu-operator', name: 'driver-abc', uid: 'u1' } };

/** The deletion that may go beside the list's first patch, if any. */
const besideFirstPatch = (actions: readonly NodeAction[]): NodeAction | undefined => driverDeletionBeside(coalesceNodeActions(actions), 0);

describe('driverDeletionBeside: the driver pod deletion sent together with the patch before it', () => {
  it('goes beside a patch that moves a cordoned, upgrading node on to pod-restart-required, past that patch’s Events', () => {
    expect(besideFirstPatch([setState('cordon-required', 'pod-restart-required'), timer, stateEvent('pod-restart-required'), deleteDriver])).toBe(deleteDriver);
  });

  it('goes beside a patch that only writes the step’s timer (a retried deletion)', () => {
    expect(besideFirstPatch([timer, deleteDriver])).toBe(deleteDriver);
  });

  it('waits for a patch that cordons: the cordon is stored before anything leaves the node', () => {
    expect(besideFirstPatch([{ kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }, setState('cordon-required', 'pod-restart-required'), deleteDriver])).toBeUndefined();
  });

  it('waits for a patch that raises a count: a restart-only start counts the node before its driver goes down', () => {
    expect(besideFirstPatch([setState('upgrade-required', 'pod-restart-required'), { kind: 'setAnnotation', node: 'n1', key: keys.restartOnly, value: 'true' }, deleteDriver])).toBeUndefined();
  });

  it('waits for a patch that sets a label other than the state (a pool selector may read it)', () => {
    expect(besideFirstPatch([{ kind: 'setLabel', node: 'n1', key: 'nvidia.com/gpu.deploy.dcgm-exporter', value: 'paused-for-driver-upgrade' }, deleteDriver])).toBeUndefined();
  });

  it('leaves other pod actions in their place: a device client is stopped only after its record is stored', () => {
    const client: NodeAction = { kind: 'deletePod', node: 'n1', pod: { namespace: 'monitoring', name: 'dcgm-exporter-x', uid: 'u2' } };
    expect(besideFirstPatch([setState('cordon-required', 'pod-restart-required'), client, deleteDriver])).toBeUndefined();
  });

  it('is nothing for a group that is not a patch, or a patch with no pod action after it', () => {
    expect(driverDeletionBeside(coalesceNodeActions([deleteDriver]), 0)).toBeUndefined();
    expect(besideFirstPatch([setState('cordon-required', 'pod-restart-required'), stateEvent('pod-restart-required')])).toBeUndefined();
  });
});
