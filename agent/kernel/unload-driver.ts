import type { LoadedModule } from '../../shared/kmod/loaded-module.ts';
import { sysfsModuleName } from '../../shared/kmod/loaded-module.ts';
import type { Logger } from '../../shared/logger.ts';
import { DriverInUseError } from './kernel-errors.ts';
import { findDeviceUsers } from './find-device-users.ts';
import type { KernelPort } from './kernel-port.ts';
import { planUnload } from './plan/plan-unload.ts';

/** The loaded ones among `names`, by sysfs name. */
export async function readLoadedModules(kernel: KernelPort, names: readonly string[]): Promise<Map<string, LoadedModule>> {
  const loaded = new Map<string, LoadedModule>();
  for (const name of names) {
    const module = await kernel.readModule(name);
    if (module !== undefined) loaded.set(module.name, module);
  }
  return loaded;
}

/** Where to look for the processes behind a refusal (optional: the refusal stands without them). */
export interface DeviceUserLookup {
  /** Paths whose open descriptors pin the driver, e.g. `/dev/nvidia`, `/dev/infiniband/uverbs`. */
  readonly devicePrefixes: readonly string[];
  /** The host's /proc (the agent needs hostPID to see other pods' processes); default /proc. */
  readonly procDir?: string;
}

/**
 * The unload order of `loaded` (holders first), or DriverInUseError listing the users: modules
 * with refcnt and holders, and, when `lookup` names device files, the processes holding them.
 */
export async function planUnloadOrRefuse(driver: string, loaded: readonly LoadedModule[], lookup?: DeviceUserLookup): Promise<readonly string[]> {
  const plan = planUnload(loaded);
  if (plan.kind === 'unload') return plan.order;
  const users = lookup === undefined ? [] : await findDeviceUsers(lookup.procDir ?? '/proc', lookup.devicePrefixes);
  throw new DriverInUseError(driver, plan.inUse, users);
}

/**
 * Unloads whichever of `modules` are loaded, holders first; refuses with DriverInUseError (nothing
 * unloaded) when one has users outside the set. Never forces. Returns the unloaded modules in
 * order. A user appearing between the check and rmmod makes rmmod fail (ModuleBusyError) and
 * leaves the modules unloaded so far unloaded.
 */
export async function unloadDriver(
  kernel: KernelPort,
  driver: string,
  modules: readonly string[],
  logger: Logger,
  lookup?: DeviceUserLookup,
): Promise<string[]> {
  const loaded = await readLoadedModules(kernel, [...new Set(modules.map(sysfsModuleName))]);
  const order = await planUnloadOrRefuse(driver, [...loaded.values()], lookup);
  const unloaded: string[] = [];
  for (const module of order) {
    await kernel.unload(module);
    unloaded.push(module);
    logger.info({ driver, module }, 'module unloaded');
  }
  return unloaded;
}
