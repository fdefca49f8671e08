/**
 * The resource names of the pods that use each kind of device, the defaults of
 * `upgradePolicy.podDeletion.resourcePrefixes` (driver-defaults.ts picks one by the driver). Pod
 * deletion removes these pods before the driver restarts, and the restart never happens under
 * one of them.
 */

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
