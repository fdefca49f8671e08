import type { KubernetesObject, V1ControllerRevision, V1Node, V1Pod } from '@kubernetes/client-node';
import { CONTROLLER_REVISION_HASH_LABEL } from '../../shared/keys.ts';
import type { DriverRolloutPolicy } from '../policy/driver-rollout-spec.ts';
import { matchesSelector } from '../policy/label-selector.ts';
import type { ClusterSnapshot, DaemonSetSnapshot, DriverPodSnapshot, NodeSnapshot, PdbSnapshot, PodSnapshot, RolloutRef } from '../plan/snapshot.ts';
import { BY_CONTROLLER, BY_NODE, type ClusterCaches } from './cluster-caches.ts';
import { ObjectMemo } from './object-memo.ts';
import { driverPodSnapshotOf, loadedDriverOf, nodeFactsOf, pdbSnapshotOf, podFactsOf, templateFingerprintOf } from './snapshot-of-object.ts';

export interface SnapshotInputs {
  readonly caches: Pick<ClusterCaches, 'nodes' | 'pods' | 'daemonSets' | 'revisions' | 'pdbs'>;
  /** Nodes this replica wrote and the caches may not show yet (read-your-writes); see `freshest`. */
  readonly writtenNodes: ReadonlyMap<string, V1Node>;
  /** Refused evictions by pod uid, reported by the executor (memory only). */
  readonly evictionBlocked: ReadonlyMap<string, { readonly at: number; readonly message: string }>;
}

/**
 * One DriverRollout's view of the cluster, from the informer caches only (no API call).
 *
 * A pass over thousands of nodes must cost little more than a look at each node, so nothing is
 * converted or assembled twice: objects are converted once (at ingest, snapshot-of-object.ts);
 * a node's pods, split into driver pods and others, are memoised on the cache's list of the
 * node's pods (the same array while none of them changed, ResourceCache.byIndex); and a node's
 * snapshot is memoised on its Node object and that split. Snapshots are never modified, so
 * passes may share them.
 */
export function buildSnapshot(rollout: RolloutRef, policy: DriverRolloutPolicy, inputs: SnapshotInputs): ClusterSnapshot {
  const { caches } = inputs;
  const drivers = selectDrivers(rollout, policy, caches);
  const nodes: NodeSnapshot[] = [];
  for (const name of managedNodeNames(policy, caches, drivers)) {
    const cached = caches.nodes.get('', name);
    if (cached === undefined) continue; // deleted: whatever we wrote to it last no longer matters
    const node = freshest(cached, inputs.writtenNodes.get(name)) ?? cached;
    const snapshot = nodeSnapshotOf(node, podsOn(caches.pods.byIndex(BY_NODE, name), drivers), drivers, policy.keys.driverLoaded);
    nodes.push(withEvictionBlocks(snapshot, inputs.evictionBlocked));
  }
  const pdbs: PdbSnapshot[] = [];
  for (const pdb of caches.pdbs.list()) pdbs.push(pdbSnapshotOf(pdb));
  return { rollout, nodes, daemonSets: drivers.daemonSets, pdbs };
}

/** The rollout's driver DaemonSets (its selector, its namespace) and what memos must tell apart. */
interface DriverSet {
  readonly daemonSets: DaemonSetSnapshot[];
  /** DaemonSet uid → its name and its place in `daemonSets` (driver pods are listed in that order). */
  readonly byUid: ReadonlyMap<string, { readonly name: string; readonly order: number }>;
  readonly conditionType: string;
  /** The DaemonSets, the agent's condition type and loaded-driver key: a memo made for one set holds for it only. */
  readonly key: string;
}

/** A node's pods: those of the rollout's DaemonSets and every other. */
interface NodePods {
  readonly driverPods: readonly DriverPodSnapshot[];
  readonly pods: readonly PodSnapshot[];
}

const nameOf = (o: KubernetesObject): string => o.metadata?.name ?? '';
const uidOf = (o: KubernetesObject): string => o.metadata?.uid ?? '';

function selectDrivers(rollout: RolloutRef, policy: DriverRolloutPolicy, caches: SnapshotInputs['caches']): DriverSet {
  const daemonSets: DaemonSetSnapshot[] = [];
  const byUid = new Map<string, { name: string; order: number }>();
  for (const ds of caches.daemonSets.list()) {
    if ((ds.metadata?.namespace ?? '') !== rollout.namespace || !matchesSelector(policy.daemonSetSelector, ds.metadata?.labels ?? {})) continue;
    const newest = newestRevision(caches.revisions.byIndex(BY_CONTROLLER, uidOf(ds)));
    byUid.set(uidOf(ds), { name: nameOf(ds), order: daemonSets.length });
    daemonSets.push({
      namespace: rollout.namespace,
      name: nameOf(ds),
      updatedRevisionHash: newest?.metadata?.labels?.[CONTROLLER_REVISION_HASH_LABEL] ?? null,
      templateFingerprint: newest === undefined ? null : templateFingerprintOf(newest),
    });
  }
  const conditionType = policy.keys.driverReadyCondition;
  const key = JSON.stringify([conditionType, policy.keys.driverLoaded, ...[...byUid].map(([uid, { name }]) => `${uid}=${name}`)]);
  return { daemonSets, byUid, conditionType, key };
}

const podsMemo = new ObjectMemo<readonly V1Pod[], Map<string, NodePods>>('pods by driver set');

/** `bucket`: the node's pods as the cache lists them (byIndex BY_NODE). */
function podsOn(bucket: readonly V1Pod[], drivers: DriverSet): NodePods {
  const byDrivers = podsMemo.get(bucket);
  const hit = byDrivers?.get(drivers.key);
  if (hit !== undefined) return hit;
  const driverPods: { readonly order: number; readonly pod: DriverPodSnapshot }[] = [];
  const pods: PodSnapshot[] = [];
  for (const pod of bucket) {
    const facts = podFactsOf(pod);
    const ds = facts.controllerUid === '' ? undefined : drivers.byUid.get(facts.controllerUid);
    if (ds === undefined) pods.push(facts.snapshot);
    else driverPods.push({ order: ds.order, pod: driverPodSnapshotOf(pod, ds.name, drivers.conditionType) });
  }
  // DaemonSet by DaemonSet, each in the cache's order (Array.prototype.sort is stable).
  driverPods.sort((a, b) => a.order - b.order);
  const split: NodePods = { driverPods: driverPods.map((d) => d.pod), pods };
  (byDrivers ?? podsMemo.set(bucket, new Map())).set(drivers.key, split);
  return split;
}

const nodeMemo = new ObjectMemo<V1Node, Map<string, { readonly split: NodePods; readonly snapshot: NodeSnapshot }>>('node snapshot by driver set');

function nodeSnapshotOf(node: V1Node, split: NodePods, drivers: DriverSet, loadedKey: string): NodeSnapshot {
  const byDrivers = nodeMemo.get(node);
  const hit = byDrivers?.get(drivers.key);
  if (hit?.split === split) return hit.snapshot;
  const snapshot: NodeSnapshot = { ...nodeFactsOf(node), driverPods: split.driverPods, pods: split.pods, loadedDriver: loadedDriverOf(node, loadedKey) };
  (byDrivers ?? nodeMemo.set(node, new Map())).set(drivers.key, { split, snapshot });
  return snapshot;
}

/** The executor's refused evictions, on their pods (memory only, so never memoised). */
function withEvictionBlocks(node: NodeSnapshot, blocked: SnapshotInputs['evictionBlocked']): NodeSnapshot {
  if (blocked.size === 0) return node;
  let pods: PodSnapshot[] | null = null;
  for (const [i, pod] of node.pods.entries()) {
    const block = blocked.get(pod.uid);
    if (block === undefined) continue;
    pods ??= [...node.pods];
    pods[i] = { ...pod, evictionBlocked: block };
  }
  return pods === null ? node : { ...node, pods };
}

const driverNodesMemo = new ObjectMemo<readonly V1Pod[], readonly string[]>('nodes of driver pods');
const sortedMemo = new WeakMap<DriverRolloutPolicy, readonly string[]>();

/**
 * Nodes with a driver pod, plus nodes still carrying this driver's state label or safe-load
 * annotation; sorted by name (the same array as last time when the set is unchanged).
 */
function managedNodeNames(policy: DriverRolloutPolicy, caches: SnapshotInputs['caches'], drivers: DriverSet): readonly string[] {
  const names = new Set<string>();
  for (const uid of drivers.byUid.keys()) {
    const bucket = caches.pods.byIndex(BY_CONTROLLER, uid);
    const onNodes = driverNodesMemo.get(bucket) ?? driverNodesMemo.set(bucket, bucket.map((p) => p.spec?.nodeName ?? '').filter((n) => n !== ''));
    for (const name of onNodes) names.add(name);
  }
  const { upgradeState, waitForSafeLoad } = policy.keys;
  for (const node of caches.nodes.list()) {
    const state = node.metadata?.labels?.[upgradeState] ?? 'unknown';
    if (state !== 'unknown' && state !== '') names.add(nameOf(node));
    else if (node.metadata?.annotations?.[waitForSafeLoad] !== undefined) names.add(nameOf(node));
  }
  const last = sortedMemo.get(policy);
  if (last?.length === names.size && last.every((n) => names.has(n))) return last;
  const sorted = [...names].sort();
  sortedMemo.set(policy, sorted);
  return sorted;
}

/**
 * The newer of the cached Node and the one this replica last wrote, by resourceVersion.
 * resourceVersions are opaque by contract, but the API server's are etcd revisions (integers);
 * when either is not, trust the cache.
 */
export function freshest(cached: V1Node | undefined, written: V1Node | undefined): V1Node | undefined {
  if (written === undefined) return cached;
  if (cached === undefined) return written;
  try {
    return BigInt(written.metadata?.resourceVersion ?? '0') > BigInt(cached.metadata?.resourceVersion ?? '0') ? written : cached;
  } catch {
    return cached;
  }
}

function newestRevision(revisions: Iterable<V1ControllerRevision>): V1ControllerRevision | undefined {
  let newest: V1ControllerRevision | undefined;
  for (const r of revisions) if (newest === undefined || r.revision > newest.revision) newest = r;
  return newest;
}
