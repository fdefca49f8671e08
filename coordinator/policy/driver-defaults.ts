/**
 * The defaults that depend on the driver: each follows the operator the driver comes from, the
 * GPU Operator for GPU drivers, the Network Operator for NIC drivers (by the kind the driver's
 * name implies, shared/device-kind.ts). A DriverRollout field that is set always wins; the CRD
 * gives these fields no default, so an absent one reaches the coordinator and is decided here.
 *
 * | field                               | gpu, nvidia (GPU Operator) | ofed, mofed, doca, nic, mlx5 (Network Operator) | any other name |
 * |-------------------------------------|----------------------------|--------------------------------------------------|----------------|
 * | upgradePolicy.podDeletion.enable    | true (gpuPodDeletion)      | false (its flow has no pod-deletion step)        | true           |
 * | upgradePolicy.drain.enable          | false                      | true (DrainSpec.enable defaults to true)         | false          |
 * | upgradePolicy.podDeletion.resourcePrefixes | GPU_RESOURCE_PREFIXES | NIC_RESOURCE_PREFIXES                         | both lists     |
 * | upgradePolicy.clients.operandLabels | GPU_OPERAND_LABELS         | none                                             | none           |
 */
import { deviceKindForDriver, type DeviceKind } from '../../shared/device-kind.ts';
import { GPU_RESOURCE_PREFIXES, NIC_RESOURCE_PREFIXES } from './device-resource-prefixes.ts';

/**
 * The GPU Operator's operand labels whose DaemonSets hold /dev/nvidia* (device plugin, GFD and
 * DCGM through NVML, MIG manager), paused by default for GPU drivers as k8s-driver-manager does.
 */
export const GPU_OPERAND_LABELS: readonly string[] = [
  'nvidia.com/gpu.deploy.device-plugin',
  'nvidia.com/gpu.deploy.gpu-feature-discovery',
  'nvidia.com/gpu.deploy.dcgm-exporter',
  'nvidia.com/gpu.deploy.dcgm',
  'nvidia.com/gpu.deploy.mig-manager',
];

export interface DriverDefaults {
  /** Whose defaults these are, as the docs name it. */
  readonly source: 'GPU Operator' | 'Network Operator' | 'GPU Operator, both device kinds';
  readonly podDeletionEnable: boolean;
  readonly drainEnable: boolean;
  readonly resourcePrefixes: readonly string[];
  readonly operandLabels: readonly string[];
}

const BY_KIND: Readonly<Record<DeviceKind, DriverDefaults>> = {
  gpu: { source: 'GPU Operator', podDeletionEnable: true, drainEnable: false, resourcePrefixes: GPU_RESOURCE_PREFIXES, operandLabels: GPU_OPERAND_LABELS },
  nic: { source: 'Network Operator', podDeletionEnable: false, drainEnable: true, resourcePrefixes: NIC_RESOURCE_PREFIXES, operandLabels: [] },
};

/**
 * A driver of no known kind: the GPU Operator's steps, and both prefix lists, since evicting a
 * pod too many is better than restarting a driver under a pod that uses it.
 */
const OTHER: DriverDefaults = {
  source: 'GPU Operator, both device kinds',
  podDeletionEnable: true,
  drainEnable: false,
  resourcePrefixes: [...GPU_RESOURCE_PREFIXES, ...NIC_RESOURCE_PREFIXES],
  operandLabels: [],
};

/** The defaults for driver `driverName` (see the table above). */
export function driverDefaults(driverName: string): DriverDefaults {
  const kind = deviceKindForDriver(driverName);
  return kind === undefined ? OTHER : BY_KIND[kind];
}
