import type { KubernetesObject, V1ContainerStatus, V1ControllerRevision, V1Node, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { parseLoadedDriver } from '../../shared/driver-identity.ts';
import { CONTROLLER_REVISION_HASH_LABEL } from '../../shared/keys.ts';
import type { DriverRolloutPolicy } from '../policy/driver-rollout-spec.ts';
import { compileLabelSelector, matchesSelector } from '../policy/label-selector.ts';
import type {
  ClusterSnapshot,
  DaemonSetSnapshot,
  DriverPodSnapshot,
  LoadedDriverSnapshot,
  NodeSnapshot,
  PdbSnapshot,
  PodPhase,
  PodSnapshot,
  RolloutRef,
} from '../plan/snapshot.ts';
import { BY_CONTROLLER, BY_NODE, type ClusterCaches } from './cluster-caches.ts';
import { revisionTemplate, templateDriverFingerprint } from './template-driver-fingerprint.ts';

export interface SnapshotInputs {
  readonly caches: Pick<ClusterCaches, 'nodes' | 'pods' | 'daemonSets' | 'revisions' | 'pdbs'>;
  /** Nodes this replica wrote and the caches may not show yet (read-your-writes); see `freshest`. */
  readonly writtenNodes: ReadonlyMap<string, V1Node>;
  /** Refused evictions by pod uid, reported by the executor (memory only). */
  readonly evictionBlocked: ReadonlyMap<string, { readonly at: number; readonly message: string }>;
}

/**
 * One DriverRollout's view of the cluster, from the informer caches only (no API call).
 * Conversions are memoised per cached object: an informer replaces an object on every change,
 * so an unchanged object is converted once, however many passes read it.
 */
export function buildSnapshot(rollout: RolloutRef, policy: DriverRolloutPolicy, inputs: SnapshotInputs): ClusterSnapshot {
  const { caches } = inputs;
  const drivers = collectDriverPods(rollout, policy, caches);
  const nodes: NodeSnapshot[] = [];
  for (const name of [...managedNodeNames(policy, caches, drivers.byNode)].sort()) {
    const cached = caches.nodes.get('', name);
    if (cached === undefined) continue; // deleted: whatever we wrote to it last no longer matters
    const node = freshest(cached, inputs.writtenNodes.get(name)) ?? cached;
    const pods: PodSnapshot[] = [];
    for (const pod of caches.pods.byIndex(BY_NODE, name)) {
      if (drivers.uids.has(uidOf(pod))) continue;
      const converted = toPod(pod);
      const blocked = inputs.evictionBlocked.get(converted.uid);
      pods.push(blocked === undefined ? converted : { ...converted, evictionBlocked: blocked });
    }
    nodes.push({ ...toNode(node), driverPods: drivers.byNode.get(name) ?? [], pods, loadedDriver: loadedDriverOf(node, policy.keys.driverLoaded) });
  }
  const pdbs: PdbSnapshot[] = [];
  for (const pdb of caches.pdbs.list()) pdbs.push(toPdb(pdb));
  return { rollout, nodes, daemonSets: drivers.daemonSets, pdbs };
}

const nameOf = (o: KubernetesObject): string => o.metadata?.name ?? '';
const uidOf = (o: KubernetesObject): string => o.metadata?.uid ?? '';
const namespaceOf = (o: KubernetesObject): string => o.metadata?.namespace ?? '';

/** The rollout's DaemonSets (its selector, its namespace), their newest revisions and their pods by node. */
function collectDriverPods(rollout: RolloutRef, policy: DriverRolloutPolicy, caches: SnapshotInputs['caches']) {
  const byNode = new Map<string, DriverPodSnapshot[]>();
  const uids = new Set<string>();
  const daemonSets: DaemonSetSnapshot[] = [];
  for (const ds of caches.daemonSets.list()) {
    if (namespaceOf(ds) !== rollout.namespace || !matchesSelector(policy.daemonSetSelector, ds.metadata?.labels ?? {})) continue;
    const uid = uidOf(ds);
    const newest = newestRevision(caches.revisions.byIndex(BY_CONTROLLER, uid));
    daemonSets.push({
      namespace: rollout.namespace,
      name: nameOf(ds),
      updatedRevisionHash: newest?.metadata?.labels?.[CONTROLLER_REVISION_HASH_LABEL] ?? null,
      templateFingerprint: newest === undefined ? null : memoised(newest, (r) => ({ fingerprint: templateDriverFingerprint(revisionTemplate(r)) })).fingerprint,
    });
    for (const pod of caches.pods.byIndex(BY_CONTROLLER, uid)) {
      const nodeName = pod.spec?.nodeName ?? '';
      if (nodeName === '') continue;
      uids.add(uidOf(pod));
      const list = byNode.get(nodeName) ?? [];
      list.push(toDriverPod(pod, nameOf(ds), policy.keys.driverReadyCondition));
      byNode.set(nodeName, list);
    }
  }
  return { byNode, uids, daemonSets };
}

/** Nodes with a driver pod, plus nodes still carrying this driver's state label or safe-load annotation. */
function managedNodeNames(policy: DriverRolloutPolicy, caches: SnapshotInputs['caches'], withDriverPod: ReadonlyMap<string, unknown>): Set<string> {
  const names = new Set(withDriverPod.keys());
  const { upgradeState, waitForSafeLoad } = policy.keys;
  for (const node of caches.nodes.list()) {
    const state = node.metadata?.labels?.[upgradeState] ?? 'unknown';
    if (state !== 'unknown' && state !== '') names.add(nameOf(node));
    else if (node.metadata?.annotations?.[waitForSafeLoad] !== undefined) names.add(nameOf(node));
  }
  return names;
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

const memo = new WeakMap<KubernetesObject, unknown>();
function memoised<T extends KubernetesObject, R>(object: T, convert: (o: T) => R): R {
  const hit = memo.get(object) as R | undefined;
  if (hit !== undefined) return hit;
  const result = convert(object);
  memo.set(object, result);
  return result;
}

const loadedMemo = new WeakMap<V1Node, { readonly key: string; readonly loaded: LoadedDriverSnapshot | null }>();

/** The agent's loaded-driver annotation, parsed once per cached Node object (and key: several drivers read one node). */
function loadedDriverOf(node: V1Node, key: string): LoadedDriverSnapshot | null {
  const hit = loadedMemo.get(node);
  if (hit?.key === key) return hit.loaded;
  const loaded = parseLoadedDriver(node.metadata?.annotations?.[key]);
  loadedMemo.set(node, { key, loaded });
  return loaded;
}

const PHASES: readonly string[] = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'];
const phaseOf = (pod: V1Pod): PodPhase => (PHASES.includes(pod.status?.phase ?? '') ? (pod.status?.phase as PodPhase) : 'Unknown');
const isReady = (conditions: readonly { type: string; status: string }[] | undefined): boolean =>
  conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
const isDeleting = (o: KubernetesObject): boolean => o.metadata?.deletionTimestamp != null;

function toDriverPod(pod: V1Pod, daemonSet: string, conditionType: string): DriverPodSnapshot {
  return memoised(pod, (p): DriverPodSnapshot => {
    const statuses = [...(p.status?.initContainerStatuses ?? []).map((s) => ({ s, init: true })), ...(p.status?.containerStatuses ?? []).map((s) => ({ s, init: false }))];
    const condition = p.status?.conditions?.find((c) => c.type === conditionType);
    return {
      namespace: namespaceOf(p),
      name: nameOf(p),
      uid: uidOf(p),
      daemonSet,
      revisionHash: p.metadata?.labels?.[CONTROLLER_REVISION_HASH_LABEL] ?? null,
      phase: phaseOf(p),
      ready: isReady(p.status?.conditions),
      restartCount: Math.max(0, ...statuses.map(({ s }) => s.restartCount)),
      deleting: isDeleting(p),
      agentCondition: condition === undefined ? null : {
        status: condition.status === 'True' || condition.status === 'False' ? condition.status : 'Unknown',
        reason: condition.reason ?? '',
        message: condition.message ?? '',
      },
      waiting: waitingText(statuses),
    };
  });
}

/** Kubelet waiting reasons that are just a container on its way up. */
const STARTING_REASONS: ReadonlySet<string> = new Set(['ContainerCreating', 'PodInitializing']);

function waitingText(statuses: readonly { readonly s: V1ContainerStatus; readonly init: boolean }[]): string | null {
  for (const { s, init } of statuses) {
    const waiting = s.state?.waiting;
    if (waiting?.reason === undefined || STARTING_REASONS.has(waiting.reason)) continue;
    const who = init ? `init container ${s.name}` : s.name;
    return `${who}: ${waiting.reason}${waiting.message === undefined || waiting.message === '' ? '' : `: ${waiting.message}`}`;
  }
  return null;
}

function toPod(pod: V1Pod): PodSnapshot {
  return memoised(pod, (p): PodSnapshot => ({
    namespace: namespaceOf(p),
    name: nameOf(p),
    uid: uidOf(p),
    labels: p.metadata?.labels ?? {},
    phase: phaseOf(p),
    ready: isReady(p.status?.conditions),
    deleting: isDeleting(p),
    controllerKind: p.metadata?.ownerReferences?.find((r) => r.controller === true)?.kind ?? null,
    controllerName: p.metadata?.ownerReferences?.find((r) => r.controller === true)?.name ?? null,
    createdAt: createdAtOf(p),
    mirror: p.metadata?.annotations?.['kubernetes.io/config.mirror'] !== undefined,
    usesEmptyDir: (p.spec?.volumes ?? []).some((v) => v.emptyDir !== undefined),
    resourceNames: resourceNamesOf(p),
    nodeLabelKeys: nodeLabelKeysOf(p),
  }));
}

/** creationTimestamp in ms; the client may hand it over as a Date or as the API's string. */
function createdAtOf(pod: V1Pod): number | null {
  const raw: unknown = pod.metadata?.creationTimestamp;
  const ms = raw instanceof Date ? raw.getTime() : typeof raw === 'string' ? Date.parse(raw) : Number.NaN;
  return Number.isFinite(ms) ? ms : null;
}

function nodeLabelKeysOf(pod: V1Pod): string[] {
  const keys = new Set(Object.keys(pod.spec?.nodeSelector ?? {}));
  for (const term of pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? []) {
    for (const e of term.matchExpressions ?? []) keys.add(e.key);
  }
  return [...keys];
}

function resourceNamesOf(pod: V1Pod): string[] {
  const resources = new Set<string>();
  for (const c of [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])]) {
    for (const r of Object.keys(c.resources?.requests ?? {})) resources.add(r);
    for (const r of Object.keys(c.resources?.limits ?? {})) resources.add(r);
  }
  return [...resources];
}

function toNode(node: V1Node): Omit<NodeSnapshot, 'driverPods' | 'pods'> {
  return memoised(node, (n) => ({
    name: n.metadata?.name ?? '',
    labels: n.metadata?.labels ?? {},
    annotations: n.metadata?.annotations ?? {},
    unschedulable: n.spec?.unschedulable === true,
    ready: isReady(n.status?.conditions),
  }));
}

function toPdb(pdb: V1PodDisruptionBudget): PdbSnapshot {
  return memoised(pdb, (p): PdbSnapshot => {
    const selector = p.spec?.selector;
    const compiled = selector === undefined ? null : compileLabelSelector(selector);
    return {
      namespace: p.metadata?.namespace ?? '',
      name: p.metadata?.name ?? '',
      // An unparseable selector selects nothing here; the API server would have rejected it anyway.
      selector: compiled === null || !compiled.ok ? null : compiled.selector,
      disruptionsAllowed: p.status?.disruptionsAllowed ?? 0,
    };
  });
}
