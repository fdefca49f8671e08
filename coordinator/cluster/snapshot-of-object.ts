import type { KubernetesObject, V1ContainerStatus, V1ControllerRevision, V1Node, V1Pod, V1PodCondition, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { CONTROLLER_REVISION_HASH_LABEL } from '../../shared/keys.ts';
import { LOADED_DRIVER, NodeAnnotationProblem, parseNodeAnnotation } from '../../shared/node-annotations.ts';
import { compileLabelSelector } from '../policy/label-selector.ts';
import type { DriverPodSnapshot, LoadedDriverSnapshot, NodeNotReadySnapshot, NodeSnapshot, PdbSnapshot, PodPhase, PodSnapshot } from '../plan/snapshot.ts';
import { ObjectMemo } from './object-memo.ts';
import { revisionTemplate, templateDriverFingerprint, templateModuleSigner } from './template-driver-fingerprint.ts';

/**
 * Cached API objects in the planner's plain-data form, each converted once per object: an
 * informer replaces an object on every change, so the conversion is memoised on the object
 * itself (object-memo.ts). The informers convert pods and nodes as they arrive (ingest-cached-object.ts), so a
 * pass, even a new leader's first, finds them ready; anything else (a Node this replica just
 * wrote, objects in tests) is converted on its first read.
 */
export type NodeFacts = Omit<NodeSnapshot, 'driverPods' | 'pods' | 'loadedDriver'>;

/** A pod as every pass reads it: its snapshot, and its controller's uid (a driver pod's is its DaemonSet's). */
export interface PodFacts {
  readonly snapshot: PodSnapshot;
  /** uid of the controller owner reference (the pod cache's BY_CONTROLLER key); '' when none. */
  readonly controllerUid: string;
}

/**
 * What is kept on a pod: its facts; for a DaemonSet's pod (a driver pod, should a rollout pick the
 * DaemonSet) the parts of its DriverPodSnapshot that no rollout changes, made at ingest too; and
 * the last DriverPodSnapshot made of it, with the DaemonSet name and condition type it was made for.
 */
interface PodRecord extends PodFacts {
  driverParts: DriverPodParts | null;
  driver: { readonly daemonSet: string; readonly conditionType: string; readonly snapshot: DriverPodSnapshot } | null;
}

interface DriverPodParts {
  readonly revisionHash: string | null;
  readonly restartCount: number;
  readonly waiting: string | null;
  readonly conditions: readonly V1PodCondition[];
}

const podMemo = new ObjectMemo<V1Pod, PodRecord>('pod facts');
const nodeMemo = new ObjectMemo<V1Node, NodeFacts>('node facts');
const pdbMemo = new ObjectMemo<V1PodDisruptionBudget, PdbSnapshot>('pdb snapshot');
const revisionMemo = new ObjectMemo<V1ControllerRevision, { readonly fingerprint: string | null; readonly signer: string | null }>('template fingerprint');

const nameOf = (o: KubernetesObject): string => o.metadata?.name ?? '';
const uidOf = (o: KubernetesObject): string => o.metadata?.uid ?? '';
const namespaceOf = (o: KubernetesObject): string => o.metadata?.namespace ?? '';

/** A pod as the planner reads it (other than a driver pod), and its controller. */
export function podFactsOf(pod: V1Pod): PodFacts {
  return podRecordOf(pod);
}

function podRecordOf(pod: V1Pod): PodRecord {
  return podMemo.get(pod) ?? podMemo.set(pod, toPodRecord(pod));
}

/** A node's own facts (the pods and the loaded driver are added per rollout). */
export function nodeFactsOf(node: V1Node): NodeFacts {
  return nodeMemo.get(node) ?? nodeMemo.set(node, toNode(node));
}

export function pdbSnapshotOf(pdb: V1PodDisruptionBudget): PdbSnapshot {
  return pdbMemo.get(pdb) ?? pdbMemo.set(pdb, toPdb(pdb));
}

/** The driver a revision's template loads (templateDriverFingerprint). */
export function templateFingerprintOf(revision: V1ControllerRevision): string | null {
  return templateFactsOf(revision).fingerprint;
}

/** Who signed the modules a revision's template loads, as it declares (templateModuleSigner). */
export function templateModuleSignerOf(revision: V1ControllerRevision): string | null {
  return templateFactsOf(revision).signer;
}

function templateFactsOf(revision: V1ControllerRevision): { readonly fingerprint: string | null; readonly signer: string | null } {
  const cached = revisionMemo.get(revision);
  if (cached !== undefined) return cached;
  const template = revisionTemplate(revision);
  return revisionMemo.set(revision, { fingerprint: templateDriverFingerprint(template), signer: templateModuleSigner(template) });
}

/** A pod of the rollout's DaemonSet `daemonSet`; `conditionType` is the agent's readiness-gate condition. */
export function driverPodSnapshotOf(pod: V1Pod, daemonSet: string, conditionType: string): DriverPodSnapshot {
  const record = podRecordOf(pod);
  const hit = record.driver;
  if (hit !== null && hit.daemonSet === daemonSet && hit.conditionType === conditionType) return hit.snapshot;
  const parts = (record.driverParts ??= driverPartsOf(pod));
  const snapshot = toDriverPod(record.snapshot, parts, daemonSet, conditionType);
  record.driver = { daemonSet, conditionType, snapshot };
  return snapshot;
}

/**
 * Whether the pod may be a driver pod, i.e. its controller is a DaemonSet (or it has been read as
 * one before): a driver pod's controller uid is its DaemonSet's, and uids are unique, so a pod
 * whose controller reference names another kind is never one. `facts` from podFactsOf.
 */
export function mayBeDriverPod(facts: PodFacts): boolean {
  return (facts as PodRecord).driverParts !== null;
}

/**
 * The agent's loaded-driver annotation `key`, parsed (not memoised here: build-snapshot.ts keeps it
 * with the node's snapshot); null when absent or not the agent's record, which takes the full
 * upgrade path (restart-only.ts), never a restart only.
 */
export function loadedDriverOf(node: V1Node, key: string): LoadedDriverSnapshot | null {
  const read = parseNodeAnnotation(LOADED_DRIVER, `node/${node.metadata?.name ?? ''}`, key, node.metadata?.annotations?.[key]);
  return read instanceof NodeAnnotationProblem ? null : (read ?? null);
}

const PHASES: readonly string[] = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'];
const phaseOf = (pod: V1Pod): PodPhase => (PHASES.includes(pod.status?.phase ?? '') ? (pod.status?.phase as PodPhase) : 'Unknown');
const isReady = (conditions: readonly { type: string; status: string }[] | undefined): boolean =>
  conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
const isDeleting = (o: KubernetesObject): boolean => o.metadata?.deletionTimestamp != null;

const NO_CONDITIONS: readonly V1PodCondition[] = [];

/** The parts of a driver pod's snapshot that its DaemonSet and the rollout do not change. */
function driverPartsOf(p: V1Pod): DriverPodParts {
  const statuses = [...(p.status?.initContainerStatuses ?? []).map((s) => ({ s, init: true })), ...(p.status?.containerStatuses ?? []).map((s) => ({ s, init: false }))];
  return {
    revisionHash: p.metadata?.labels?.[CONTROLLER_REVISION_HASH_LABEL] ?? null,
    restartCount: Math.max(0, ...statuses.map(({ s }) => s.restartCount)),
    waiting: waitingText(statuses),
    conditions: p.status?.conditions ?? NO_CONDITIONS,
  };
}

/** `pod`: the pod's own snapshot (namespace, name, uid, phase, readiness, deletion as toPod reads them). */
function toDriverPod(pod: PodSnapshot, parts: DriverPodParts, daemonSet: string, conditionType: string): DriverPodSnapshot {
  const condition = parts.conditions.find((c) => c.type === conditionType);
  return {
    namespace: pod.namespace,
    name: pod.name,
    uid: pod.uid,
    daemonSet,
    revisionHash: parts.revisionHash,
    phase: pod.phase,
    ready: pod.ready,
    restartCount: parts.restartCount,
    deleting: pod.deleting,
    agentCondition: condition === undefined ? null : {
      status: condition.status === 'True' || condition.status === 'False' ? condition.status : 'Unknown',
      reason: condition.reason ?? '',
      message: condition.message ?? '',
    },
    waiting: parts.waiting,
  };
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

const NO_STRINGS: readonly string[] = [];

function toPodRecord(p: V1Pod): PodRecord {
  const controller = p.metadata?.ownerReferences?.find((r) => r.controller === true);
  return {
    snapshot: toPod(p, controller?.kind ?? null, controller?.name ?? null),
    controllerUid: controller?.uid ?? '',
    // Made at ingest for a DaemonSet's pod (any pod a rollout could read as its driver pod); for another, should it ever be read as one.
    driverParts: controller?.kind === 'DaemonSet' ? driverPartsOf(p) : null,
    driver: null,
  };
}

function toPod(p: V1Pod, controllerKind: string | null, controllerName: string | null): PodSnapshot {
  return {
    namespace: namespaceOf(p),
    name: nameOf(p),
    uid: uidOf(p),
    labels: p.metadata?.labels ?? {},
    phase: phaseOf(p),
    ready: isReady(p.status?.conditions),
    deleting: isDeleting(p),
    controllerKind,
    controllerName,
    createdAt: createdAtOf(p),
    mirror: p.metadata?.annotations?.['kubernetes.io/config.mirror'] !== undefined,
    usesEmptyDir: (p.spec?.volumes ?? []).some((v) => v.emptyDir !== undefined),
    resourceNames: resourceNamesOf(p),
    nodeLabelKeys: nodeLabelKeysOf(p),
  };
}

/** creationTimestamp in ms; the client may hand it over as a Date or as the API's string. */
function createdAtOf(pod: V1Pod): number | null {
  const raw: unknown = pod.metadata?.creationTimestamp;
  const ms = raw instanceof Date ? raw.getTime() : typeof raw === 'string' ? Date.parse(raw) : Number.NaN;
  return Number.isFinite(ms) ? ms : null;
}

function nodeLabelKeysOf(pod: V1Pod): readonly string[] {
  const selector = pod.spec?.nodeSelector;
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (selector === undefined && terms === undefined) return NO_STRINGS;
  const keys = new Set(Object.keys(selector ?? {}));
  for (const term of terms ?? []) {
    for (const e of term.matchExpressions ?? []) keys.add(e.key);
  }
  return [...keys];
}

function resourceNamesOf(pod: V1Pod): readonly string[] {
  const resources = new Set<string>();
  const add = (containers: readonly { resources?: { requests?: object; limits?: object } }[] | undefined): void => {
    for (const c of containers ?? []) {
      for (const r of Object.keys(c.resources?.requests ?? {})) resources.add(r);
      for (const r of Object.keys(c.resources?.limits ?? {})) resources.add(r);
    }
  };
  add(pod.spec?.containers);
  add(pod.spec?.initContainers);
  return resources.size === 0 ? NO_STRINGS : [...resources];
}

function toNode(n: V1Node): NodeFacts {
  return {
    name: n.metadata?.name ?? '',
    labels: n.metadata?.labels ?? {},
    annotations: n.metadata?.annotations ?? {},
    unschedulable: n.spec?.unschedulable === true,
    ready: isReady(n.status?.conditions),
    kernelVersion: nonEmpty(n.status?.nodeInfo?.kernelVersion),
    notReady: notReadyOf(n),
  };
}

const nonEmpty = (text: string | undefined): string | null => (text === undefined || text === '' ? null : text);

/** The node's Ready condition when it is there and not True; null otherwise. */
function notReadyOf(n: V1Node): NodeNotReadySnapshot | null {
  const c = n.status?.conditions?.find((x) => x.type === 'Ready');
  if (c === undefined || c.status === 'True') return null;
  const since = c.lastTransitionTime === undefined ? Number.NaN : new Date(c.lastTransitionTime).getTime();
  return { status: c.status, reason: c.reason ?? '', message: c.message ?? '', since: Number.isFinite(since) ? since : null };
}

function toPdb(p: V1PodDisruptionBudget): PdbSnapshot {
  const selector = p.spec?.selector;
  const compiled = selector === undefined ? null : compileLabelSelector(selector);
  return {
    namespace: p.metadata?.namespace ?? '',
    name: p.metadata?.name ?? '',
    // An unparseable selector selects nothing here; the API server would have rejected it anyway.
    selector: compiled === null || !compiled.ok ? null : compiled.selector,
    disruptionsAllowed: p.status?.disruptionsAllowed ?? 0,
  };
}
