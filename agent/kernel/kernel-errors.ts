import { DriverRolloutError } from '../../shared/errors.ts';
import { describeModulesInUse, type ModuleInUse } from '../../shared/kmod/find-module-users.ts';
import { describeDeviceUsers, type DeviceUser } from './find-device-users.ts';
import { describeRefusal, type RefusedModule } from '../../shared/module-signature-verdict.ts';

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

/**
 * A module of the driver failed to load. `failedModule` is the one the kernel refused, read from
 * /sys/module after modprobe stopped (modprobe names the module it was asked for: `modprobe
 * nvidia_uvm` reports "could not insert 'nvidia_uvm'" when it was nvidia's init that failed).
 * The driver's modules that did load were unloaded again.
 */
export class ModuleLoadError extends DriverRolloutError {
  readonly failedModule: string;
  readonly requested: string;

  constructor(fields: { failedModule: string; requested: string; leftLoaded: readonly string[] }, cause: KernelCommandError) {
    const blamed = fields.requested === fields.failedModule ? '' : `; modprobe ${fields.requested} names ${fields.requested}, the kernel refused ${fields.failedModule}`;
    const left = fields.leftLoaded.length === 0 ? 'no driver module left loaded' : `still loaded: ${fields.leftLoaded.join(', ')}`;
    super(`${fields.failedModule} failed to load: ${lastLine(cause.stderr)}${blamed}; ${left}`, fields, { cause });
    this.failedModule = fields.failedModule;
    this.requested = fields.requested;
  }
}

/**
 * The new driver failed to load after the old one was unloaded, and the agent loaded the last
 * good driver (from its module cache) again: the devices work, the node is not upgraded.
 */
export class DriverRolledBackError extends DriverRolloutError {
  readonly restoredVersion: string;

  constructor(failure: Error, restored: { version: string; modules: readonly string[] }) {
    super(`${failure.message}; rolled back to the last good driver ${restored.version} (${restored.modules.join(', ')} loaded and verified)`, { restoredVersion: restored.version, restoredModules: restored.modules }, { cause: failure });
    this.restoredVersion = restored.version;
  }
}

/**
 * A firmware file a module declares (`modinfo -F firmware`) is in none of the places the kernel
 * looks: the driver would load and then fail at device init (NVIDIA's open modules need the GSP
 * firmware of their own release). Checked before anything is unloaded.
 */
export class FirmwareMissingError extends DriverRolloutError {}

/**
 * A place where a declared firmware file could be could not be checked (EACCES, ELOOP, EIO): the
 * check cannot say the file is missing, nor that it is there. Fields: `module`, `firmware`, `path`,
 * `code`; `cause` is the file system's error. Checked before anything is unloaded.
 */
export class FirmwareUncheckableError extends DriverRolloutError {}

function lastLine(text: string): string {
  const lines = text.trim().split('\n').filter((l) => l.trim() !== '');
  return lines.at(-1)?.replace(/^modprobe: ERROR: /, '') ?? '(no output)';
}

/**
 * Modules that stand for users (MOFED's storage modules: an NVMe-oF or NFS-over-RDMA mount)
 * hold the driver: nothing is unloaded unless a policy allows unloading them.
 */
export class HeldByUserModulesError extends DriverRolloutError {
  readonly holders: readonly string[];

  constructor(driver: string, holders: readonly string[]) {
    super(`driver is in use: held by ${holders.join(', ')} (modules that serve users, e.g. storage over RDMA); stop their users, or allow the agent to unload them`, { driver, holders });
    this.holders = holders;
  }
}

/**
 * A module that must be unloaded for the reload is on the never-unload list (`--never-unload`):
 * nothing was changed, and the new driver can take over only through a reboot.
 */
export class NeverUnloadError extends DriverRolloutError {
  readonly modules: readonly string[];

  constructor(driver: string, modules: readonly string[], version: string) {
    super(
      `reboot required: ${modules.join(', ')} ${modules.length === 1 ? 'is' : 'are'} set never to unload (--never-unload), so ${driver} ${version} can load only after a reboot; nothing was unloaded`,
      { driver, modules, version },
    );
    this.modules = modules;
  }
}

/**
 * The kernel enforces module signatures (module.sig_enforce, lockdown, Secure Boot) and would
 * refuse modules of the driver: unsigned, or signed by a key in none of its trusted keyrings.
 * Checked before anything is unloaded. Fields: `enforcedBy`, `untrusted` (module and signer),
 * `trustedKeys` (names the kernel has).
 */
export class ModuleSignatureUntrustedError extends DriverRolloutError {
  constructor(driver: string, enforcedBy: readonly string[], untrusted: readonly RefusedModule[], trustedKeys: readonly string[]) {
    super(`${describeRefusal(driver, { enforcedBy, untrusted, trustedKeys })}; nothing was unloaded`, { driver, enforcedBy, untrusted, trustedKeys });
  }
}
