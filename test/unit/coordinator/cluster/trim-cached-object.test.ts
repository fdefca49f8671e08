import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildSnapshot } from '../../../../coordinator/cluster/build-snapshot.ts';
import { ingestNode, ingestPod } from '../../../../coordinator/cluster/ingest-cached-object.ts';
import { trimNode, trimPod } from '../../../../coordinator/cluster/trim-cached-object.ts';
import { parseDriverRolloutSpec } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { aDaemonSet, aDriverPod, aNode, aPod, aRevision, cachesOf } from './fixtures.ts';

const parsed = parseDriverRolloutSpec({ driverName: 'gpu', selector: { matchLabels: { app: 'nvidia-driver' } }, upgradePolicy: { podDeletion: {}, drain: { enable: true } } });
if (!parsed.ok) throw new Error('fixture policy is invalid');
const policy = parsed.policy;
const rollout = { namespace: 'gpu-operator', name: 'gpu', generation: 1 };
const driver = aDaemonSet('gpu-operator', 'driver', { app: 'nvidia-driver' });
const managedFields = [{ manager: 'kubelet', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:status': {} } }];

/** Objects as the API server sends them: managedFields, images, addresses, env, probes... */
function serverShaped(): { nodes: V1Node[]; pods: V1Pod[] } {
  const nodes = [aNode('gpu-1'), aNode('gpu-2', { unschedulable: true, labels: { [policy.keys.upgradeState]: 'drain-required' }, annotations: { [policy.keys.drainStartTime]: '1' } }), aNode('gpu-3', { ready: false }), aNode('gpu-4')];
  // gpu-4: its kubelet stopped reporting; the node controller set Ready Unknown (what a NotReady hold names).
  const silent = nodes[3]?.status;
  if (silent !== undefined) {
    silent.conditions = [
      { type: 'MemoryPressure', status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.', lastHeartbeatTime: new Date(5_000), lastTransitionTime: new Date(9_000) },
      { type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.', lastHeartbeatTime: new Date(5_000), lastTransitionTime: new Date(9_000) },
    ];
  }
  for (const n of nodes) {
    if (n.metadata !== undefined) n.metadata.managedFields = managedFields;
    if (n.status !== undefined) Object.assign(n.status, { images: [{ names: ['registry/a:1'], sizeBytes: 1 }], addresses: [{ type: 'InternalIP', address: '10.0.0.1' }], capacity: { cpu: '8' } });
  }
  const pods = [
    aDriverPod(driver, 'gpu-1', 'old'),
    aDriverPod(driver, 'gpu-2', 'new', {
      restarts: 3,
      ready: false,
      status: {
        // The agent's failure, an init container's restarts and a waiting reason: what failure detection reads.
        conditions: [{ type: 'Ready', status: 'False' }, { type: policy.keys.driverReadyCondition, status: 'False', reason: 'CompileFailed', message: 'nv.c:1: error: boom', lastTransitionTime: new Date(0) }],
        initContainerStatuses: [{ name: 'init', image: 'init:1', imageID: 'sha', ready: false, restartCount: 5, state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 5m0s' } }, lastState: { terminated: { exitCode: 1, reason: 'Error' } } }],
      },
    }),
    aDriverPod(driver, 'gpu-3', 'new', { deleting: true }),
    aPod('ml', 'trainer', 'gpu-1', { owner: { kind: 'Job', uid: 'job-1' }, requests: { 'nvidia.com/gpu': '1' }, emptyDir: true, labels: { team: 'a' } }),
    aPod('kube-system', 'static', 'gpu-2', { mirror: true }),
    aPod('ml', 'bare', 'gpu-2', { requests: { cpu: '1' }, ready: false }),
  ];
  // An operand: requires its node label (operand pausing reads the keys).
  const operand = aPod('gpu-operator', 'device-plugin', 'gpu-1', { owner: { kind: 'DaemonSet', uid: 'dp-1' } });
  operand.spec = {
    nodeName: 'gpu-1',
    containers: [{ name: 'c', image: 'i' }],
    nodeSelector: { 'nvidia.com/gpu.deploy.device-plugin': 'true' },
    affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'nvidia.com/gpu.present', operator: 'Exists' }] }] } } },
  };
  pods.push(operand, aDriverPod(driver, 'gpu-4', 'new'));
  for (const p of pods) {
    if (p.metadata !== undefined) p.metadata.managedFields = managedFields;
    if (p.spec !== undefined) {
      for (const c of p.spec.containers) Object.assign(c, { env: [{ name: 'A', value: 'b' }], args: ['--x'] });
      p.spec.initContainers = [{ name: 'init', image: 'init:1', resources: { limits: { 'nvidia.com/gpu': '1' } } }];
      p.spec.volumes = [...(p.spec.volumes ?? []), { name: 'token', projected: { sources: [] } }];
      p.spec.tolerations = [{ operator: 'Exists' }];
    }
    if (p.status !== undefined) {
      Object.assign(p.status, { podIP: '10.1.0.1', hostIP: '10.0.0.1' });
      p.status.conditions = [...(p.status.conditions ?? []), { type: 'Initialized', status: 'True', reason: 'x', message: 'y' }];
    }
  }
  return { nodes, pods };
}

function snapshotOf(objects: { nodes: V1Node[]; pods: V1Pod[] }) {
  return buildSnapshot(rollout, policy, {
    caches: cachesOf({ ...objects, daemonSets: [driver], revisions: [aRevision(driver, 1, 'old'), aRevision(driver, 2, 'new')] }),
    writtenNodes: new Map(),
    evictionBlocked: new Map(),
    deletedPods: new Map(),
  });
}

describe('trimming cached objects', () => {
  it('leaves every fact a snapshot reads: snapshots of trimmed and full objects are equal', () => {
    const trimmed = serverShaped();
    for (const n of trimmed.nodes) trimNode(n);
    for (const p of trimmed.pods) trimPod(p);
    expect(snapshotOf(trimmed)).toEqual(snapshotOf(serverShaped()));
  });

  it('converts at ingest what the trim left: snapshots of ingested and full objects are equal', () => {
    const ingested = serverShaped();
    for (const n of ingested.nodes) ingestNode(n);
    for (const p of ingested.pods) ingestPod(p);
    expect(snapshotOf(ingested)).toEqual(snapshotOf(serverShaped()));
  });

  it("keeps the agent's failure, init container restarts, waiting reasons and an operand's required node labels", () => {
    const trimmed = serverShaped();
    for (const p of trimmed.pods) trimPod(p);
    const snapshot = snapshotOf(trimmed);
    const failing = snapshot.nodes.find((n) => n.name === 'gpu-2')?.driverPods[0];
    expect(failing?.agentCondition).toEqual({ status: 'False', reason: 'CompileFailed', message: 'nv.c:1: error: boom' });
    expect(failing?.restartCount).toBe(5);
    expect(failing?.waiting).toBe('init container init: CrashLoopBackOff: back-off 5m0s');
    const operand = snapshot.nodes.find((n) => n.name === 'gpu-1')?.pods.find((p) => p.name === 'device-plugin');
    expect(operand?.nodeLabelKeys).toEqual(['nvidia.com/gpu.deploy.device-plugin', 'nvidia.com/gpu.present']);
  });

  it("keeps a NotReady node's Ready condition: status, reason, message and since when", () => {
    const trimmed = serverShaped();
    for (const n of trimmed.nodes) trimNode(n);
    const snapshot = snapshotOf(trimmed);
    expect(snapshot.nodes.find((n) => n.name === 'gpu-4')?.notReady).toEqual({ status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.', since: 9_000 });
    expect(snapshot.nodes.find((n) => n.name === 'gpu-3')?.notReady).toEqual({ status: 'False', reason: '', message: '', since: null });
    expect(snapshot.nodes.find((n) => n.name === 'gpu-1')?.notReady).toBeNull();
    expect(trimmed.nodes[3]?.status?.conditions).toEqual([
      { type: 'MemoryPressure', status: 'Unknown' },
      { type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.', lastTransitionTime: new Date(9_000) },
    ]);
  });

  it('drops managedFields and the parts nothing reads, in place', () => {
    const { nodes, pods } = serverShaped();
    const pod = pods[3];
    const node = nodes[0];
    if (pod === undefined || node === undefined) throw new Error('fixture');
    trimPod(pod);
    trimNode(node);
    expect(pod.metadata?.managedFields).toBeUndefined();
    expect(pod.spec?.containers[0]).toEqual({ name: 'c', resources: { requests: { 'nvidia.com/gpu': '1' } } });
    expect(pod.spec?.volumes).toEqual([{ name: 'scratch', emptyDir: {} }, { name: 'token' }]);
    expect(pod.spec?.tolerations).toBeUndefined();
    expect(pod.status?.podIP).toBeUndefined();
    expect(node.metadata?.managedFields).toBeUndefined();
    expect(node.status).toEqual({ conditions: [{ type: 'Ready', status: 'True' }] });
  });

  it('keeps every metadata field but managedFields, and trimming again changes nothing (the list pages and the informer both trim)', () => {
    const { nodes, pods } = serverShaped();
    const full = serverShaped();
    for (const p of pods) trimPod(p);
    for (const n of nodes) trimNode(n);
    const withoutManaged = <M extends { managedFields?: unknown }>(m: M | undefined): Omit<M, 'managedFields'> | undefined => {
      if (m === undefined) return undefined;
      const { managedFields: _dropped, ...rest } = m;
      return rest;
    };
    expect(pods.map((p) => p.metadata)).toStrictEqual(full.pods.map((p) => withoutManaged(p.metadata)));
    expect(nodes.map((n) => n.metadata)).toStrictEqual(full.nodes.map((n) => withoutManaged(n.metadata)));
    const once = structuredClone({ nodes, pods });
    const metadataObjects = pods.map((p) => p.metadata);
    for (const p of pods) trimPod(p);
    for (const n of nodes) trimNode(n);
    expect({ nodes, pods }).toStrictEqual(once);
    pods.forEach((p, i) => {
      expect(p.metadata).toBe(metadataObjects[i]);
    });
  });
});
