import type { KubernetesObject, V1ControllerRevision, V1Node, V1Pod } from '@kubernetes/client-node';
import { CONTROLLER_REVISION_HASH_LABEL } from '../../shared/keys.ts';
import { NODE_ANNOTATIONS, parseNodeAnnotation } from '../../shared/node-annotations.ts';
import type { DriverRolloutPolicy } from '../policy/driver-rollout-spec.ts';
import { matchesSelector } from '../policy/label-selector.ts';
import { markDeleting } from '../plan/mark-deleting.ts';
import { markedAsByName } from '../plan/nodes-by-name.ts';
import type { ClusterSnapshot, DaemonSetSnapshot, DriverPodSnapshot, NodeSnapshot, PdbSnapshot, PodSnapshot, RolloutRef } from '../plan/snapshot.ts';
import { BY_CONTROLLER, BY_NODE, type ClusterCaches } from './cluster-caches.ts';
import { ObjectMemo } from './object-memo.ts';
import { driverPodSnapshotOf, mayBeDriverPod, loadedDriverOf, nodeFactsOf, pdbSnapshotOf, podFactsOf, templateFingerprintOf, templateModuleSignerOf } from './snapshot-of-object.ts';

export interface SnapshotInputs {
  readonly caches: Pick<ClusterCaches, 'nodes' | 'pods' | 'daemonSets' | 'revisions' | 'pdbs'>;
  /** Nodes this replica wrote and the caches may not show yet (read-your-writes); see `freshest`. */
  readonly writtenNodes: ReadonlyMap<string, V1Node>;
  /** Refused evictions by pod uid, reported by the executor (memory only). */
  readonly evictionBlocked: ReadonlyMap<string, { readonly at: number; readonly message: string }>;
  /** Pods this replica deleted or evicted, by uid, that the caches may not show terminating yet (read-your-writes). */
  readonly deletedPods: ReadonlyMap<string, unknown>;
}

/**
 * One DriverRollout's view of the cluster, from the informer caches only (no API call).
 *
 * A pass over thousands of nodes must cost little more than a look at each node, so nothing is
 * converted or assembled twice: objects are converted once (at ingest, snapshot-of-object.ts);
 * a node's pods, split into driver pods and others, and the node's snapshot are kept per node name
 * (SnapshotMemo) with the Node object and the cache's list of the node's pods they were made from
 * (the same array while none of them changed, ResourceCache.byIndex), and reused while both are
 * the same; the order of the managed nodes by name is reused while the same names come from the
 * cache in the same order. Snapshots are never modified, so passes may share them.
 */
export function buildSnapshot(rollout: RolloutRef, policy: DriverRolloutPolicy, inputs: SnapshotInputs): ClusterSnapshot {
  const { caches } = inputs;
  const drivers = selectDrivers(rollout, policy, caches);
  const memo = memoFor(drivers, policy);
  memo.pass++;
  const nodes: NodeSnapshot[] = [];
  for (const cached of managedNodes(policy, caches, drivers, memo)) {
    const name = nameOf(cached);
    const node = freshest(cached, inputs.writtenNodes.get(name)) ?? cached;
    const snapshot = nodeSnapshotOf(memo, name, node, caches.pods.byIndex(BY_NODE, name), drivers, policy.keys.driverLoaded);
    nodes.push(withOwnDeletions(withEvictionBlocks(snapshot, inputs.evictionBlocked), inputs.deletedPods));
  }
  memo.forgetUnseen(nodes.length);
  const pdbs: PdbSnapshot[] = [];
  for (const pdb of caches.pdbs.list()) pdbs.push(pdbSnapshotOf(pdb));
  // managedNodes gives the nodes by name, and nothing modifies a snapshot.
  return { rollout, nodes: markedAsByName(nodes), daemonSets: drivers.daemonSets, pdbs };
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
    const revisions = caches.revisions.byIndex(BY_CONTROLLER, uidOf(ds));
    const newest = newestRevision(revisions);
    const previous = newest === undefined ? undefined : previousRevision(revisions, newest);
    byUid.set(uidOf(ds), { name: nameOf(ds), order: daemonSets.length });
    daemonSets.push({
      namespace: rollout.namespace,
      name: nameOf(ds),
      updatedRevisionHash: newest?.metadata?.labels?.[CONTROLLER_REVISION_HASH_LABEL] ?? null,
      templateFingerprint: newest === undefined ? null : templateFingerprintOf(newest),
      templateModuleSigner: newest === undefined ? null : templateModuleSignerOf(newest),
      previousRevisionHash: previous?.metadata?.labels?.[CONTROLLER_REVISION_HASH_LABEL] ?? null,
      newestIsRollback: newest !== undefined && isMadeNewestAgain(revisions, newest),
    });
  }
  const conditionType = policy.keys.driverReadyCondition;
  const key = JSON.stringify([conditionType, policy.keys.driverLoaded, ...[...byUid].map(([uid, { name }]) => `${uid}=${name}`)]);
  return { daemonSets, byUid, conditionType, key };
}

function memoFor(drivers: DriverSet, policy: DriverRolloutPolicy): SnapshotMemo {
  // The state label and safe-load annotation decide which nodes are managed (managedNodes).
  const key = `${drivers.key}\n${policy.keys.upgradeState}\n${policy.keys.waitForSafeLoad}`;
  let memo = memos.get(key);
  if (memo === undefined) memo = new SnapshotMemo();
  memos.delete(key);
  memos.set(key, memo); // most recently used last
  for (const oldest of memos.keys()) {
    if (memos.size <= MAX_MEMOS) break;
    memos.delete(oldest);
  }
  return memo;
}

/** Driver sets remembered at once (one per DriverRollout, normally a handful); the least recently used goes first. */
const MAX_MEMOS = 16;
const memos = new Map<string, SnapshotMemo>();

/** What a node's snapshot was made from, and the snapshot. */
interface NodeEntry {
  node: V1Node;
  /** The cache's list of the node's pods (byIndex BY_NODE). */
  bucket: readonly V1Pod[];
  split: NodePods;
  snapshot: NodeSnapshot;
  /** The pass that last read it. */
  seen: number;
}

/**
 * Per driver set (and state keys): the node snapshots of the last pass by node name, and the order
 * of the managed nodes. Holds the cache's objects of the last pass only: a node no longer managed
 * is forgotten at the end of the pass that no longer reads it.
 */
class SnapshotMemo {
  pass = 0;
  readonly nodes = new Map<string, NodeEntry>();
  /** Managed node names in the cache's order, and `order[i]`: the index in that list of the i-th by name (null: the cache's order is by name). */
  names: readonly string[] = [];
  order: readonly number[] | null = null;

  forgetUnseen(read: number): void {
    if (this.nodes.size <= read) return;
    for (const [name, entry] of this.nodes) if (entry.seen !== this.pass) this.nodes.delete(name);
  }
}

function nodeSnapshotOf(memo: SnapshotMemo, name: string, node: V1Node, bucket: readonly V1Pod[], drivers: DriverSet, loadedKey: string): NodeSnapshot {
  const entry = memo.nodes.get(name);
  if (entry !== undefined && entry.node === node && entry.bucket === bucket) {
    entry.seen = memo.pass;
    return entry.snapshot;
  }
  const split = entry?.bucket === bucket ? entry.split : podsOn(bucket, drivers);
  const loadedDriver = entry?.node === node ? entry.snapshot.loadedDriver : loadedDriverOf(node, loadedKey);
  const facts = nodeFactsOf(node);
  const snapshot: NodeSnapshot = { name: facts.name, labels: facts.labels, annotations: facts.annotations, unschedulable: facts.unschedulable, ready: facts.ready, notReady: facts.notReady, kernelVersion: facts.kernelVersion, driverPods: split.driverPods, pods: split.pods, loadedDriver };
  if (entry === undefined) memo.nodes.set(name, { node, bucket, split, snapshot, seen: memo.pass });
  else {
    entry.node = node;
    entry.bucket = bucket;
    entry.split = split;
    entry.snapshot = snapshot;
    entry.seen = memo.pass;
  }
  return snapshot;
}

/** `bucket`: the node's pods as the cache lists them (byIndex BY_NODE). */
function podsOn(bucket: readonly V1Pod[], drivers: DriverSet): NodePods {
  let driverPods: DriverPodSnapshot[] | null = null;
  let orders: number[] | null = null;
  const pods: PodSnapshot[] = [];
  for (const pod of bucket) {
    const facts = podFactsOf(pod);
    // No lookup for the pods of other controllers (mayBeDriverPod).
    const ds = mayBeDriverPod(facts) ? drivers.byUid.get(facts.controllerUid) : undefined;
    if (ds === undefined) pods.push(facts.snapshot);
    else {
      (driverPods ??= []).push(driverPodSnapshotOf(pod, ds.name, drivers.conditionType));
      (orders ??= []).push(ds.order);
    }
  }
  if (driverPods === null || orders === null) return { driverPods: NO_DRIVER_PODS, pods };
  return { driverPods: inDaemonSetOrder(driverPods, orders), pods };
}

const NO_DRIVER_PODS: readonly DriverPodSnapshot[] = [];

/** DaemonSet by DaemonSet (`orders[i]`: the place of pod i's DaemonSet), each in the cache's order; the list itself when already so. */
function inDaemonSetOrder(driverPods: DriverPodSnapshot[], orders: readonly number[]): readonly DriverPodSnapshot[] {
  let sorted = true;
  for (let i = 1; i < orders.length && sorted; i++) sorted = (orders[i - 1] ?? 0) <= (orders[i] ?? 0);
  if (sorted) return driverPods;
  // Array.prototype.sort is stable.
  return driverPods.map((pod, i) => ({ pod, order: orders[i] ?? 0 })).sort((a, b) => a.order - b.order).map((d) => d.pod);
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

/** The pods this replica deleted or evicted, terminating on their node before the caches show it (memory only, so never memoised). */
function withOwnDeletions(node: NodeSnapshot, deleted: SnapshotInputs['deletedPods']): NodeSnapshot {
  const pods = markDeleting(node.pods, deleted);
  const driverPods = markDeleting(node.driverPods, deleted);
  return pods === node.pods && driverPods === node.driverPods ? node : { ...node, pods, driverPods };
}

/** Names of the nodes the DaemonSet's pods are bound to, on the cache's list of its pods. */
const driverNodesMemo = new ObjectMemo<readonly V1Pod[], ReadonlySet<string>>('nodes of driver pods');

/**
 * The cached Nodes with a driver pod, plus those still carrying this driver's state label or
 * safe-load annotation; sorted by name. One look at each cached node; the sort is made again only
 * when the managed names, in the cache's order, differ from the last pass's.
 */
function managedNodes(policy: DriverRolloutPolicy, caches: SnapshotInputs['caches'], drivers: DriverSet, memo: SnapshotMemo): V1Node[] {
  const { upgradeState, waitForSafeLoad } = policy.keys;
  // Made at the first node that carries neither mark: on a cluster whose nodes all carry the state label, never.
  let withDriverPod: readonly ReadonlySet<string>[] | null = null;
  const names: string[] = [];
  const managed: V1Node[] = [];
  let sameNames = true;
  for (const node of caches.nodes.list()) {
    const name = nameOf(node);
    if (!hasRolloutMark(node, upgradeState, waitForSafeLoad) && !hasDriverPod(name, (withDriverPod ??= driverNodeSets(caches, drivers)))) continue;
    if (sameNames && memo.names[names.length] !== name) sameNames = false;
    names.push(name);
    managed.push(node);
  }
  if (!sameNames || names.length !== memo.names.length) {
    memo.names = names;
    memo.order = isSortedByName(names) ? null : names.map((_, i) => i).sort((a, b) => compareStrings(names[a] ?? '', names[b] ?? ''));
  }
  // The API server lists nodes by name, so the cache's order is usually the sorted one already.
  const order = memo.order;
  return order === null ? managed : order.map((i) => managed[i] as V1Node);
}

/** Per driver DaemonSet, the names of the nodes its pods are bound to. */
function driverNodeSets(caches: SnapshotInputs['caches'], drivers: DriverSet): ReadonlySet<string>[] {
  const sets: ReadonlySet<string>[] = [];
  for (const uid of drivers.byUid.keys()) {
    const bucket = caches.pods.byIndex(BY_CONTROLLER, uid);
    sets.push(driverNodesMemo.get(bucket) ?? driverNodesMemo.set(bucket, nodeNamesOf(bucket)));
  }
  return sets;
}

function nodeNamesOf(pods: readonly V1Pod[]): ReadonlySet<string> {
  const names = new Set<string>();
  for (const pod of pods) {
    const name = pod.spec?.nodeName ?? '';
    if (name !== '') names.add(name);
  }
  return names;
}

function isSortedByName(names: readonly string[]): boolean {
  for (let i = 1; i < names.length; i++) if (compareStrings(names[i - 1] ?? '', names[i] ?? '') > 0) return false;
  return true;
}

/** The node carries this driver's state label (other than unknown) or its safe-load annotation. */
function hasRolloutMark(node: V1Node, upgradeState: string, waitForSafeLoad: string): boolean {
  const state = node.metadata?.labels?.[upgradeState] ?? 'unknown';
  if (state !== 'unknown' && state !== '') return true;
  return parseNodeAnnotation(NODE_ANNOTATIONS.waitForSafeLoad, `node/${node.metadata?.name ?? ''}`, waitForSafeLoad, node.metadata?.annotations?.[waitForSafeLoad]) !== undefined;
}

function hasDriverPod(name: string, withDriverPod: readonly ReadonlySet<string>[]): boolean {
  for (const set of withDriverPod) if (set.has(name)) return true;
  return false;
}

/** Array.prototype.sort's default order for strings (UTF-16 code units). */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
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

/** The revision just below `newest` (by `revision`). */
export function previousRevision(revisions: Iterable<V1ControllerRevision>, newest: V1ControllerRevision): V1ControllerRevision | undefined {
  let previous: V1ControllerRevision | undefined;
  for (const r of revisions) if (r.revision < newest.revision && (previous === undefined || r.revision > previous.revision)) previous = r;
  return previous;
}

/**
 * The DaemonSet controller makes an older ControllerRevision newest again (raises its `revision`)
 * when the template goes back to it (`kubectl rollout undo`, a canary rollback): the newest is
 * then older than one with a lower `revision`. Creation times have whole seconds: two revisions
 * made within one second are not told apart (read as not a rollback).
 */
function isMadeNewestAgain(revisions: Iterable<V1ControllerRevision>, newest: V1ControllerRevision): boolean {
  const created = createdMs(newest);
  for (const r of revisions) if (r.revision < newest.revision && createdMs(r) > created) return true;
  return false;
}

/** A Date from a typed client, a string from a custom-object cache: ms, NaN when missing. */
function createdMs(r: V1ControllerRevision): number {
  const at = r.metadata?.creationTimestamp;
  return at === undefined ? Number.NaN : new Date(at).getTime();
}

function newestRevision(revisions: Iterable<V1ControllerRevision>): V1ControllerRevision | undefined {
  let newest: V1ControllerRevision | undefined;
  for (const r of revisions) if (newest === undefined || r.revision > newest.revision) newest = r;
  return newest;
}
