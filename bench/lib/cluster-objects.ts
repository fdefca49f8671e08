/**
 * API objects as the informers hold them, for benchmarks of the snapshot builder and planner:
 * `nodes` nodes with `podsPerNode` pods each (one of them the driver pod), mid-rollout, with
 * managedFields and the usual server-filled parts, so memory and conversion cost are realistic.
 */
import type { V1ControllerRevision, V1DaemonSet, V1ManagedFieldsEntry, V1Node, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { CONTROLLER_REVISION_HASH_LABEL, type UpgradeState } from '../../shared/keys.ts';
import { POD_INDEXES, REVISION_INDEXES, type ClusterCaches } from '../../coordinator/cluster/cluster-caches.ts';
import { InMemoryCache } from '../../test/doubles/in-memory-cache.ts';
import { KEYS, secondsAgo } from '../../test/unit/coordinator/plan/fixtures.ts';

export const DRIVER_NAMESPACE = 'gpu-operator';
const DS_UID = 'ds-gpu-driver';
const STATES: readonly UpgradeState[] = ['upgrade-done', 'upgrade-required', 'upgrade-required', 'upgrade-required', 'drain-required', 'wait-for-jobs-required', 'pod-restart-required', 'validation-required'];

const managedFields = (manager: string): V1ManagedFieldsEntry[] => [
  { manager, operation: 'Update', apiVersion: 'v1', time: new Date(0), fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': { 'f:labels': { '.': {}, 'f:app': {} } }, 'f:spec': { 'f:containers': { 'k:{"name":"main"}': { '.': {}, 'f:image': {}, 'f:resources': {} } } } } },
  { manager: 'kubelet', operation: 'Update', apiVersion: 'v1', time: new Date(0), fieldsType: 'FieldsV1', subresource: 'status', fieldsV1: { 'f:status': { 'f:conditions': { 'k:{"type":"Ready"}': { '.': {}, 'f:status': {} } }, 'f:phase': {} } } },
];

export interface CacheSet {
  readonly caches: Pick<ClusterCaches, 'nodes' | 'pods' | 'daemonSets' | 'revisions' | 'pdbs'>;
  readonly nodes: V1Node[];
  readonly pods: V1Pod[];
}

export function clusterObjects(nodeCount: number, podsPerNode = 10): CacheSet {
  const nodes: V1Node[] = [];
  const pods: V1Pod[] = [];
  for (let i = 0; i < nodeCount; i++) {
    const name = `node-${String(i).padStart(5, '0')}`;
    const state = STATES[i % STATES.length] ?? 'upgrade-done';
    const started = state !== 'upgrade-done' && state !== 'upgrade-required';
    nodes.push({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        uid: `uid-${name}`,
        resourceVersion: String(1000 + i),
        labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', [KEYS.upgradeState]: state, rack: `r${i % 8}`, wave: String(i % 5) },
        annotations: started ? { [KEYS.upgradeStartTime]: secondsAgo(600), [KEYS.drainStartTime]: secondsAgo(60), [KEYS.validationStartTime]: secondsAgo(60) } : { 'node.alpha.kubernetes.io/ttl': '0' },
        managedFields: managedFields('kube-controller-manager'),
      },
      spec: started ? { unschedulable: true, podCIDR: '10.0.0.0/24' } : { podCIDR: '10.0.0.0/24' },
      status: {
        conditions: ['MemoryPressure', 'DiskPressure', 'PIDPressure'].map((type) => ({ type, status: 'False', reason: 'KubeletHasSufficient', message: 'ok' })).concat([{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' }]),
        addresses: [{ type: 'InternalIP', address: `10.1.${i >> 8}.${i & 255}` }, { type: 'Hostname', address: name }],
        capacity: { cpu: '64', memory: '512Gi', pods: '110', 'nvidia.com/gpu': '8' },
        allocatable: { cpu: '63', memory: '500Gi', pods: '110', 'nvidia.com/gpu': '8' },
        nodeInfo: { architecture: 'amd64', bootID: '', containerRuntimeVersion: 'containerd://2.0', kernelVersion: '6.1.0', kubeProxyVersion: '', kubeletVersion: 'v1.36.4', machineID: '', operatingSystem: 'linux', osImage: 'Debian GNU/Linux 12', systemUUID: '' },
      },
    });
    pods.push(driverPod(name, state === 'upgrade-done' ? 'rev-new' : 'rev-old'));
    for (let j = 0; j < podsPerNode - 1; j++) pods.push(workloadPod(name, j));
  }
  const daemonSet: V1DaemonSet = { metadata: { name: 'gpu-driver', namespace: DRIVER_NAMESPACE, uid: DS_UID, labels: { app: 'gpu-driver' } }, spec: { selector: { matchLabels: { app: 'gpu-driver' } }, template: {} } };
  const revisions: V1ControllerRevision[] = ['rev-old', 'rev-new'].map((hash, i) => ({
    metadata: { name: `gpu-driver-${hash}`, namespace: DRIVER_NAMESPACE, labels: { [CONTROLLER_REVISION_HASH_LABEL]: hash }, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'gpu-driver', uid: DS_UID, controller: true }] },
    revision: i + 1,
  }));
  const pdbs: V1PodDisruptionBudget[] = Array.from({ length: 20 }, (_, i) => ({
    metadata: { name: `pdb-${i}`, namespace: `team-${i}` },
    spec: { selector: { matchLabels: { app: 'web' } } },
    status: { disruptionsAllowed: i % 2, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1 },
  }));
  return {
    nodes,
    pods,
    caches: {
      nodes: new InMemoryCache(nodes),
      pods: new InMemoryCache(pods, POD_INDEXES),
      daemonSets: new InMemoryCache([daemonSet]),
      revisions: new InMemoryCache(revisions, REVISION_INDEXES),
      pdbs: new InMemoryCache(pdbs),
    },
  };
}

function driverPod(node: string, hash: string): V1Pod {
  return {
    metadata: {
      name: `gpu-driver-${node}`,
      namespace: DRIVER_NAMESPACE,
      uid: `driver-${node}`,
      labels: { app: 'gpu-driver', [CONTROLLER_REVISION_HASH_LABEL]: hash, 'pod-template-generation': '2' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'gpu-driver', uid: DS_UID, controller: true, blockOwnerDeletion: true }],
      managedFields: managedFields('kube-controller-manager'),
    },
    spec: {
      nodeName: node,
      containers: [{ name: 'driver', image: 'nvcr.io/nvidia/driver:550', securityContext: { privileged: true }, volumeMounts: [{ name: 'host', mountPath: '/host' }] }],
      volumes: [{ name: 'host', hostPath: { path: '/' } }],
      tolerations: [{ operator: 'Exists' }],
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], containerStatuses: [{ name: 'driver', image: 'nvcr.io/nvidia/driver:550', imageID: '', ready: true, restartCount: 0 }] },
  };
}

function workloadPod(node: string, j: number): V1Pod {
  const gpu = j % 2 === 0;
  return {
    metadata: {
      name: `${node}-pod-${j}`,
      namespace: `team-${j % 20}`,
      uid: `${node}-${j}`,
      labels: { app: j % 3 === 0 ? 'train' : j === 8 ? 'validator' : 'web', tier: String(j % 4), 'pod-template-hash': 'abc123' },
      annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-01T00:00:00Z' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: j === 8 ? 'DaemonSet' : 'ReplicaSet', name: `rs-${j}`, uid: `rs-${j}`, controller: true, blockOwnerDeletion: true }],
      managedFields: managedFields('kube-controller-manager'),
    },
    spec: {
      nodeName: node,
      containers: [{ name: 'main', image: 'registry.example/team/app:1.2.3', args: ['--serve', '--port=8080'], env: [{ name: 'MODE', value: 'prod' }], resources: { requests: gpu ? { cpu: '4', memory: '16Gi', 'nvidia.com/gpu': '1' } : { cpu: '1', memory: '2Gi' }, limits: gpu ? { 'nvidia.com/gpu': '1' } : {} } }],
      volumes: [{ name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3607 } }] } }],
    },
    status: { phase: 'Running', podIP: '10.2.0.1', conditions: [{ type: 'Initialized', status: 'True' }, { type: 'Ready', status: 'True' }, { type: 'ContainersReady', status: 'True' }], containerStatuses: [{ name: 'main', image: 'registry.example/team/app:1.2.3', imageID: 'sha256:0', ready: true, restartCount: 0 }] },
  };
}

