import { join } from 'node:path';
import { stringify } from 'yaml';

export interface KubeletSettings {
  /** The node's work dir: the kubelet's root, pod logs and plugin dirs are under it. */
  readonly dir: string;
  /** cgroup of every pod of this node, made beforehand in each hierarchy by host.sh. */
  readonly cgroupRoot: string;
  readonly containerdSocket: string;
  readonly clientCaFile: string;
  readonly port: number;
  readonly healthzPort: number;
}

/**
 * The KubeletConfiguration of a test-bed node on this kind of machine: cgroup v1 allowed
 * (failCgroupV1: false; cgroupfs, no systemd), its API on 127.0.0.1 only, every writable path
 * under the work dir, eviction thresholds a shared build machine does not trip, and status
 * reported often enough for a test to see changes quickly.
 */
export function kubeletConfig(s: KubeletSettings): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: s.cgroupRoot,
    cgroupsPerQOS: true,
    enforceNodeAllocatable: ['pods'],
    containerRuntimeEndpoint: `unix://${s.containerdSocket}`,
    address: '127.0.0.1',
    port: s.port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: s.healthzPort,
    // Only the API server on this machine reaches it, over loopback; it has no kubelet client cert.
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false }, x509: { clientCAFile: s.clientCaFile } },
    authorization: { mode: 'AlwaysAllow' },
    podLogsDir: join(s.dir, 'pod-logs'),
    volumePluginDir: join(s.dir, 'volume-plugins'),
    clusterDomain: 'cluster.local',
    failSwapOn: false,
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '2%', 'imagefs.available': '2%' },
    imageGCHighThresholdPercent: 100,
    syncFrequency: '10s',
    nodeStatusReportFrequency: '10s',
    serializeImagePulls: false,
    rotateCertificates: false,
    serverTLSBootstrap: false,
  });
}
