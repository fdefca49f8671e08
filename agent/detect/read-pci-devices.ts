import { readdir, readlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { DriverRolloutError } from '../../shared/errors.ts';
import { ifExists, readTextIfExists } from '../../shared/fs/if-exists.ts';
import type { PciDevice, SriovInfo } from './pci-device.ts';

/** The sysfs tree could not be read at all (wrong mount, wrong root): not the same as "no devices". */
export class SysfsUnreadableError extends DriverRolloutError {}

/**
 * Every PCI function under `<sysfsRoot>/bus/pci/devices`, sorted by address. `sysfsRoot` is `/sys`
 * on a node; tests point it at a fixture tree with the same layout (symlinks included).
 *
 * sysfs quirks handled here: `bus/pci/devices/*` are symlinks into `devices/pci0000:00/...`;
 * `driver`, `physfn` and `virtfnN` are symlinks whose target's last component is the name;
 * `numa_node` is -1 when unknown; SR-IOV files exist only on functions with the capability.
 */
export async function readPciDevices(sysfsRoot: string): Promise<PciDevice[]> {
  const bus = join(sysfsRoot, 'bus', 'pci', 'devices');
  let addresses: string[];
  try {
    addresses = await readdir(bus);
  } catch (error) {
    throw new SysfsUnreadableError(`cannot list PCI devices in ${bus}`, { path: bus }, { cause: error });
  }
  const devices = await Promise.all(addresses.map((address) => readPciDevice(join(bus, address), address)));
  return devices.sort((a, b) => a.address.localeCompare(b.address));
}

async function readPciDevice(dir: string, address: string): Promise<PciDevice> {
  const [vendor, device, classCode, driver, numaText, sriov, physfn, netInterfaces] = await Promise.all([
    readHex(join(dir, 'vendor')),
    readHex(join(dir, 'device')),
    readHex(join(dir, 'class')),
    readLinkName(join(dir, 'driver')),
    readOptional(join(dir, 'numa_node')),
    readSriov(dir),
    readLinkName(join(dir, 'physfn')),
    listOptional(join(dir, 'net')),
  ]);
  const numa = numaText === undefined ? Number.NaN : Number.parseInt(numaText, 10);
  return {
    address,
    vendor: vendor ?? '',
    device: device ?? '',
    classCode: classCode ?? '',
    driver,
    numaNode: Number.isInteger(numa) && numa >= 0 ? numa : undefined,
    sriov,
    physicalFunction: physfn,
    netInterfaces: netInterfaces.sort(),
  };
}

async function readSriov(dir: string): Promise<SriovInfo | undefined> {
  const total = await readOptional(join(dir, 'sriov_totalvfs'));
  if (total === undefined) return undefined;
  const num = await readOptional(join(dir, 'sriov_numvfs'));
  const entries = await listOptional(dir);
  const vfLinks = entries
    .map((name) => ({ name, index: /^virtfn(\d+)$/.exec(name)?.[1] }))
    .filter((e): e is { name: string; index: string } => e.index !== undefined)
    .sort((a, b) => Number(a.index) - Number(b.index));
  const vfs = await Promise.all(vfLinks.map((e) => readLinkName(join(dir, e.name))));
  return {
    totalVfs: toCount(total),
    numVfs: toCount(num),
    virtualFunctions: vfs.filter((a): a is string => a !== undefined),
  };
}

function toCount(text: string | undefined): number {
  const n = text === undefined ? 0 : Number.parseInt(text, 10);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

async function readHex(path: string): Promise<string | undefined> {
  return (await readOptional(path))?.toLowerCase();
}

/** readlink on something that is not a link answers EINVAL: for these sysfs reads that is "absent" too. */
const ABSENT = { alsoCodes: ['EINVAL'] };

async function readOptional(path: string): Promise<string | undefined> {
  return (await readTextIfExists(path, ABSENT))?.trim();
}

async function readLinkName(path: string): Promise<string | undefined> {
  const target = await ifExists(() => readlink(path), ABSENT);
  return target === undefined ? undefined : basename(target);
}

async function listOptional(path: string): Promise<string[]> {
  return (await ifExists(() => readdir(path), ABSENT)) ?? [];
}
