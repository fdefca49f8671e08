import type { HostInfo, HostInfoPort } from './host-info.ts';
import { selectDevices, type DeviceSelector } from './device-selector.ts';
import type { PciDevice } from './pci-device.ts';
import { readPciDevices } from './read-pci-devices.ts';

/** What the agent knows about its node before building anything. */
export interface NodeDetection {
  /** Physical functions this driver serves, sorted by address; their VFs are in `sriov`. */
  readonly devices: readonly PciDevice[];
  /** The host, with `kernelRelease` already replaced by the configured override, if any. */
  readonly host: HostInfo;
}

export interface DetectNodeInput {
  readonly sysfsRoot: string;
  readonly selector: DeviceSelector;
  readonly hostInfo: HostInfoPort;
  /** Build for this kernel instead of the running one (pre-building for a kernel about to boot). */
  readonly kernelReleaseOverride?: string | undefined;
}

export async function detectNode(input: DetectNodeInput): Promise<NodeDetection> {
  const [all, host] = await Promise.all([readPciDevices(input.sysfsRoot), input.hostInfo.readHostInfo()]);
  return {
    devices: selectDevices(all, input.selector),
    host: input.kernelReleaseOverride === undefined ? host : { ...host, kernelRelease: input.kernelReleaseOverride },
  };
}

export function hasDevices(detection: NodeDetection): boolean {
  return detection.devices.length > 0;
}

/** Enabled virtual functions across every served device. */
export function countVirtualFunctions(devices: readonly PciDevice[]): number {
  return devices.reduce((n, d) => n + (d.sriov?.virtualFunctions.length ?? 0), 0);
}

/**
 * One log-friendly line per device, e.g.
 * `0000:3b:00.0 15b3:101d driver=mlx5_core numa=0 vfs=4/8 net=[ens1f0np0]`.
 */
export function describeDevice(d: PciDevice): string {
  const parts = [
    d.address,
    `${d.vendor.replace(/^0x/, '')}:${d.device.replace(/^0x/, '')}`,
    `driver=${d.driver ?? 'none'}`,
    `numa=${d.numaNode ?? 'unknown'}`,
  ];
  if (d.sriov !== undefined) parts.push(`vfs=${d.sriov.virtualFunctions.length}/${d.sriov.totalVfs}`);
  if (d.netInterfaces.length > 0) parts.push(`net=[${d.netInterfaces.join(',')}]`);
  return parts.join(' ');
}

/** Drivers currently bound to the served devices (e.g. `nouveau` racing the NVIDIA driver). */
export function boundDrivers(devices: readonly PciDevice[]): string[] {
  return [...new Set(devices.map((d) => d.driver).filter((x): x is string => x !== undefined))].sort();
}

/**
 * Drivers other than `ours` (module names) bound to the served devices: a distro's `nouveau`
 * holding the GPU makes the NVIDIA module's probe fail with "No such device".
 */
export function competingBoundDrivers(devices: readonly PciDevice[], ours: readonly string[]): string[] {
  const own = new Set(ours.map((m) => m.replaceAll('-', '_')));
  return boundDrivers(devices).filter((d) => !own.has(d.replaceAll('-', '_')));
}
