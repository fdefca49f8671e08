import { readlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { ifExists, readTextIfExists } from '../../shared/fs/if-exists.ts';
import { findDeviceUsers, type DeviceUser } from '../kernel/find-device-users.ts';
import type { BindingToRemove, VirtualFunctionsToRemove } from './plan-device-teardown.ts';
import { DeviceTeardownError } from './teardown-errors.ts';

/** The sysfs writes of a device teardown and restore, under `sysfsRoot` (`/sys`; a fixture tree in tests). */

const deviceDir = (sysfsRoot: string, address: string) => join(sysfsRoot, 'bus', 'pci', 'devices', address);
const driverDir = (sysfsRoot: string, driver: string) => join(sysfsRoot, 'bus', 'pci', 'drivers', driver);

async function write(path: string, value: string, what: string): Promise<void> {
  try {
    await writeFile(path, value);
  } catch (error) {
    throw new DeviceTeardownError(`${what}: writing "${value}" to ${path} failed`, { path, value }, { cause: error });
  }
}

async function boundDriver(sysfsRoot: string, address: string): Promise<string | undefined> {
  const target = await ifExists(() => readlink(join(deviceDir(sysfsRoot, address), 'driver')), { alsoCodes: ['EINVAL'] });
  return target === undefined ? undefined : basename(target);
}

/** Unbinds a function from its driver (`<driver>/unbind`); nothing when it is no longer bound to it. */
export async function unbindFunction(sysfsRoot: string, binding: BindingToRemove): Promise<void> {
  if ((await boundDriver(sysfsRoot, binding.address)) !== binding.driver) return;
  await write(join(driverDir(sysfsRoot, binding.driver), 'unbind'), binding.address, `unbind ${binding.address} from ${binding.driver}`);
}

/**
 * Binds a function to `driver` again: `driver_override` (vfio-pci binds only what is named so),
 * off any driver that probed it meanwhile (a VF re-created with SR-IOV gets its PF's VF driver),
 * then `<driver>/bind`. Nothing when it is bound to it already.
 */
export async function bindFunction(sysfsRoot: string, binding: BindingToRemove): Promise<void> {
  const current = await boundDriver(sysfsRoot, binding.address);
  if (current === binding.driver) return;
  const what = `bind ${binding.address} to ${binding.driver}`;
  await write(join(deviceDir(sysfsRoot, binding.address), 'driver_override'), binding.driver, what);
  if (current !== undefined) await write(join(driverDir(sysfsRoot, current), 'unbind'), binding.address, what);
  await write(join(driverDir(sysfsRoot, binding.driver), 'bind'), binding.address, what);
}

/** Sets a PF's VF count; the kernel refuses a change between two non-zero counts, so through 0. */
export async function setVirtualFunctionCount(sysfsRoot: string, physicalFunction: string, count: number): Promise<void> {
  const path = join(deviceDir(sysfsRoot, physicalFunction), 'sriov_numvfs');
  const current = Number.parseInt((await readTextIfExists(path))?.trim() ?? '0', 10);
  if (current === count) return;
  const what = `set the SR-IOV VFs of ${physicalFunction} to ${count}`;
  if (current !== 0 && count !== 0) await write(path, '0', what);
  await write(path, String(count), what);
}

/** Re-creates the VFs, and what else the record says, of one PF. */
export async function restoreVirtualFunctions(sysfsRoot: string, removed: VirtualFunctionsToRemove): Promise<void> {
  await setVirtualFunctionCount(sysfsRoot, removed.physicalFunction, removed.numVfs);
}

/**
 * The processes holding a VF's VFIO group device (`<vfioDir>/<iommu group>`, what QEMU and
 * KubeVirt's virt-launcher open), per VF. VFs without an IOMMU group, or whose group nobody
 * holds, are left out.
 */
export async function findVirtualFunctionUsers(
  sysfsRoot: string,
  vfs: readonly { readonly address: string; readonly physicalFunction: string }[],
  options: { readonly vfioDir: string; readonly procDir: string },
): Promise<{ readonly address: string; readonly physicalFunction: string; readonly users: readonly DeviceUser[] }[]> {
  const groups = new Map<string, { address: string; physicalFunction: string }>();
  for (const vf of vfs) {
    const link = await ifExists(() => readlink(join(deviceDir(sysfsRoot, vf.address), 'iommu_group')), { alsoCodes: ['EINVAL'] });
    if (link !== undefined) groups.set(join(options.vfioDir, basename(link)), vf);
  }
  if (groups.size === 0) return [];
  const users = await findDeviceUsers(options.procDir, [...groups.keys()]);
  const inUse: { address: string; physicalFunction: string; users: DeviceUser[] }[] = [];
  for (const [path, vf] of groups) {
    // findDeviceUsers matches prefixes: /dev/vfio/1 would also take /dev/vfio/12.
    const holding = users.filter((u) => u.files.includes(path)).map((u) => ({ ...u, files: [path] }));
    if (holding.length > 0) inUse.push({ ...vf, users: holding });
  }
  return inUse;
}
