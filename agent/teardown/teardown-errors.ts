import { DriverRolloutError } from '../../shared/errors.ts';
import { describeDeviceUsers, type DeviceUser } from '../kernel/find-device-users.ts';

/** Which half of the unload a holder command belongs to. */
export type HolderPhase = 'check' | 'stop' | 'start';

/**
 * A configured holder command (a host daemon such as nvidia-persistenced) failed or ran past its
 * timeout. Before the unload (`stop`): nothing was unloaded, what was stopped was started again.
 * After the load (`start`): the driver runs, the daemon does not; retried with the agent's backoff.
 */
export class HolderCommandError extends DriverRolloutError {
  readonly holder: string;
  readonly phase: HolderPhase;
  readonly timedOut: boolean;

  constructor(fields: { holder: string; phase: HolderPhase; command: string; exitCode: number | undefined; timedOut: boolean; timeoutMs: number; output: string }, options?: ErrorOptions) {
    const how = fields.timedOut ? `did not finish within ${fields.timeoutMs / 1000} s` : `exited ${fields.exitCode ?? 'on a signal'}`;
    const output = fields.output.trim() === '' ? '' : `: ${fields.output.trim().split('\n').slice(-3).join(' | ')}`;
    super(`cannot ${fields.phase} ${fields.holder} (${fields.command}) ${fields.phase === 'start' ? 'after the load' : 'before the unload'}: it ${how}${output}`, fields, options);
    this.holder = fields.holder;
    this.phase = fields.phase;
    this.timedOut = fields.timedOut;
  }
}

/**
 * SR-IOV virtual functions of a PF the driver serves are open (a VM or pod holds their VFIO
 * device): removing them would pull the device from under it, so nothing was changed.
 */
export class VirtualFunctionsInUseError extends DriverRolloutError {
  readonly virtualFunctions: readonly string[];

  constructor(driver: string, inUse: readonly { readonly address: string; readonly physicalFunction: string; readonly users: readonly DeviceUser[] }[]) {
    const named = inUse.map((vf) => `${vf.address} (VF of ${vf.physicalFunction}; ${describeDeviceUsers(vf.users)})`).join('; ');
    super(`the ${driver} driver cannot be unloaded: SR-IOV virtual functions are in use: ${named}; nothing was unloaded (stop the VMs or pods using them, e.g. drain the node)`, {
      driver,
      virtualFunctions: inUse.map((vf) => vf.address),
    });
    this.virtualFunctions = inUse.map((vf) => vf.address);
  }
}

/** A sysfs write of the teardown or restore failed (the kernel refused `sriov_numvfs`, a bind). */
export class DeviceTeardownError extends DriverRolloutError {}
