/**
 * A PCI function as sysfs shows it under `<root>/bus/pci/devices/<address>`.
 * Hex identifiers keep sysfs's spelling: lower case with a `0x` prefix (`0x10de`, `0x030200`).
 */
export interface PciDevice {
  /** Domain:bus:device.function, e.g. `0000:3b:00.0`. */
  readonly address: string;
  readonly vendor: string;
  readonly device: string;
  /** 24-bit class code: class, subclass, programming interface (`0x020000` = Ethernet). */
  readonly classCode: string;
  /** Name of the kernel driver bound to the function (`driver` symlink), if any. */
  readonly driver: string | undefined;
  /** NUMA node of the function; sysfs says -1 when the platform does not tell. */
  readonly numaNode: number | undefined;
  /** SR-IOV capability of a physical function; undefined when it has none. */
  readonly sriov: SriovInfo | undefined;
  /** For a virtual function: the address of its physical function (`physfn` symlink). */
  readonly physicalFunction: string | undefined;
  /** Network interfaces the function exposes (`net/*`): empty for GPUs and unbound NICs. */
  readonly netInterfaces: readonly string[];
}

export interface SriovInfo {
  readonly totalVfs: number;
  readonly numVfs: number;
  /** Addresses of the enabled virtual functions, ordered by VF index (`virtfn0`, `virtfn1`, ...). */
  readonly virtualFunctions: readonly string[];
}

/** A virtual function is reported under its physical function, never as a device of its own. */
export function isVirtualFunction(device: PciDevice): boolean {
  return device.physicalFunction !== undefined;
}
