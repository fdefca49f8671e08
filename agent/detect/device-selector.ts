import type { DeviceKind } from '../../shared/device-kind.ts';
import { isVirtualFunction, type PciDevice } from './pci-device.ts';

/**
 * Which PCI functions a driver serves: any of `vendors` AND a class code starting with any of
 * `classPrefixes` (class + subclass, e.g. `0x0302` = 3D controller, whatever the prog-if byte).
 * Values use sysfs's spelling: lower-case hex with `0x`.
 */
export interface DeviceSelector {
  readonly vendors: readonly string[];
  readonly classPrefixes: readonly string[];
}

/**
 * NVIDIA GPUs: VGA (0x0300) and 3D (0x0302) controllers; data-centre GPUs are 3D controllers.
 * Mellanox/NVIDIA NICs: Ethernet (0x0200) and InfiniBand (0x0207) controllers.
 */
export const DEVICE_KIND_SELECTORS: Readonly<Record<DeviceKind, DeviceSelector>> = {
  gpu: { vendors: ['0x10de'], classPrefixes: ['0x0300', '0x0302'] },
  nic: { vendors: ['0x15b3'], classPrefixes: ['0x0200', '0x0207'] },
};

/**
 * Whether the driver serves NVIDIA's GPUs (its vendors include the `gpu` kind's, 0x10de): such a
 * driver's root must carry NVIDIA's user space of the modules' release (the version guard) and
 * the daemons beside it; another driver's root (dkms-nic's: the C library only) carries neither.
 */
export function servesNvidiaGpus(selector: DeviceSelector): boolean {
  return DEVICE_KIND_SELECTORS.gpu.vendors.some((vendor) => selector.vendors.includes(vendor));
}

export function matchesSelector(device: PciDevice, selector: DeviceSelector): boolean {
  return (
    selector.vendors.includes(device.vendor) &&
    selector.classPrefixes.some((prefix) => device.classCode.startsWith(prefix))
  );
}

/**
 * The physical functions the driver serves. Virtual functions are left out: they belong to
 * their physical function (listed in its `sriov`) and are not separate devices to count.
 */
export function selectDevices(devices: readonly PciDevice[], selector: DeviceSelector): PciDevice[] {
  return devices.filter((d) => !isVirtualFunction(d) && matchesSelector(d, selector));
}

/** Normalises a user-written hex id (`10DE`, `0x10de`) to sysfs's spelling; undefined if not hex. */
export function normalizeHexId(text: string, digits: number): string | undefined {
  const bare = text.trim().toLowerCase().replace(/^0x/, '');
  if (!/^[0-9a-f]+$/.test(bare) || bare.length > digits) return undefined;
  return `0x${bare.padStart(digits, '0')}`;
}
