import { DriverRolloutError } from '../../shared/errors.ts';
import { describeModulesInUse, type ModuleInUse } from '../../shared/kmod/find-module-users.ts';
import { describeDeviceUsers, type DeviceUser } from './find-device-users.ts';

/**
 * The driver cannot be reloaded: something outside the modules being unloaded uses them
 * (an open device file, a mount, a module that is not ours). Nothing was unloaded. The fix is
 * to stop the users (drain the node's workloads), not to force the unload.
 */
export class DriverInUseError extends DriverRolloutError {
  readonly inUse: readonly ModuleInUse[];
  /** Processes found holding the driver's device files (when the caller named them). */
  readonly deviceUsers: readonly DeviceUser[];

  constructor(driver: string, inUse: readonly ModuleInUse[], deviceUsers: readonly DeviceUser[] = []) {
    const processes = deviceUsers.length === 0 ? '' : `; open by ${describeDeviceUsers(deviceUsers)}`;
    super(`driver is in use: ${describeModulesInUse(inUse)}${processes}`, { driver, inUse, deviceUsers });
    this.inUse = inUse;
    this.deviceUsers = deviceUsers;
  }
}

/** modprobe, rmmod or depmod exited non-zero; `stderr` is the tool's own explanation. */
export class KernelCommandError extends DriverRolloutError {
  readonly command: string;
  readonly exitCode: number | undefined;
  readonly stderr: string;

  constructor(fields: { command: string; exitCode: number | undefined; stderr: string }) {
    super(`${fields.command} failed (exit ${fields.exitCode ?? 'signal'}): ${fields.stderr.trim() || '(no output)'}`, fields);
    this.command = fields.command;
    this.exitCode = fields.exitCode;
    this.stderr = fields.stderr;
  }
}

/** The kernel refused to unload a module that is in use (EBUSY/EWOULDBLOCK from delete_module). */
export class ModuleBusyError extends KernelCommandError {}

/** After loading, a module is missing from /sys/module or its srcversion is not the built one. */
export class DriverVerificationError extends DriverRolloutError {}

/**
 * A module to load needs another that modprobe cannot find in the tree and that is not staying
 * loaded: loading would fail with "Unknown symbol" after the old driver was unloaded, so nothing is.
 */
export class ModuleDependencyError extends DriverRolloutError {}
