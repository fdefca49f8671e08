/**
 * Which pods use a driver's device when the DriverRollout does not say
 * (`upgradePolicy.podDeletion.resourcePrefixes` absent): by the kind of device its driver name
 * implies (shared/device-kind.ts). Pod deletion removes these pods before the driver restarts,
 * and the restart never happens under one of them.
 */
import { deviceKindForDriver, type DeviceKind } from '../../shared/device-kind.ts';

/**
 * The GPU Operator's device plugin resources: `nvidia.com/gpu` (and its time-sliced or renamed
 * `nvidia.com/gpu.shared` ...) and the MIG profiles `nvidia.com/mig-<profile>`, as its
 * gpuPodDeletion deletes them.
 */
export const GPU_RESOURCE_PREFIXES: readonly string[] = ['nvidia.com/gpu', 'nvidia.com/mig-'];

/**
 * The Network Operator's device plugin resources: the RDMA shared device plugin's `rdma/`
 * (`rdma/rdma_shared_device_a`), the SR-IOV / host-device plugin's names under the prefix the
 * Network Operator gives them (`nvidia.com/hostdev`, `nvidia.com/rdma_host_dev`, ...) and the SR-IOV
 * Network Operator's own default prefix `openshift.io/`. Never `nvidia.com/gpu`: a NIC driver's
 * restart does not touch GPU pods. SR-IOV pools named otherwise (`nvidia.com/<name>`) are listed
 * in the spec, or their pods selected with podDeletion.podSelector.
 */
export const NIC_RESOURCE_PREFIXES: readonly string[] = ['rdma/', 'nvidia.com/hostdev', 'nvidia.com/rdma', 'openshift.io/'];

const BY_KIND: Readonly<Record<DeviceKind, readonly string[]>> = { gpu: GPU_RESOURCE_PREFIXES, nic: NIC_RESOURCE_PREFIXES };

/**
 * The default for driver `driverName`: GPU prefixes for `gpu`/`nvidia`, NIC prefixes for
 * `ofed`/`mofed`/`doca`/`nic`/`mlx5`; for any other name both lists, since evicting a pod too
 * many is better than restarting a driver under a pod that uses it.
 */
export function defaultResourcePrefixes(driverName: string): readonly string[] {
  const kind = deviceKindForDriver(driverName);
  return kind === undefined ? [...GPU_RESOURCE_PREFIXES, ...NIC_RESOURCE_PREFIXES] : BY_KIND[kind];
}
