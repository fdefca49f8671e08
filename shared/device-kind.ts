/**
 * The kinds of device a driver serves, and the kind a driver's name implies. The agent uses it
 * to pick the PCI functions to detect (agent/detect/device-selector.ts); the coordinator to pick
 * the resource names of the pods that use the device (coordinator/policy/driver-defaults.ts).
 */
export const DEVICE_KINDS = ['gpu', 'nic'] as const;
export type DeviceKind = (typeof DEVICE_KINDS)[number];

/**
 * The device kind a driver name implies, if any: `gpu`, `nvidia` → GPUs (the GPU Operator's
 * driver is `gpu`); `ofed`, `mofed`, `doca`, `nic`, `mlx5` → NICs (the Network Operator's is `ofed`).
 */
export function deviceKindForDriver(driver: string): DeviceKind | undefined {
  if (driver === 'gpu' || driver === 'nvidia') return 'gpu';
  if (['ofed', 'mofed', 'doca', 'nic', 'mlx5'].includes(driver)) return 'nic';
  return undefined;
}
