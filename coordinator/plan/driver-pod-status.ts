/**
 * Summarises the driver pod(s) on a node. Out of date = the pod's controller-revision-hash differs
 * from the newest ControllerRevision of its DaemonSet (driver DaemonSets use OnDelete, so only we
 * replace pods). Terminating pods are ignored: they are on their way out.
 */
import type { DriverPodSnapshot, NodeSnapshot } from './snapshot.ts';

export interface DriverPodStatus {
  /** Non-terminating driver pods on the node. */
  readonly pods: readonly DriverPodSnapshot[];
  /** Pods whose revision differs from their DaemonSet's newest one. */
  readonly outOfDate: readonly DriverPodSnapshot[];
  /** A DaemonSet's newest revision is not known yet, so currency cannot be judged. */
  readonly revisionUnknown: boolean;
  /** At least one pod, none out of date, revision known. */
  readonly current: boolean;
  /** Current and every pod Ready. */
  readonly ready: boolean;
  /** Highest container restart count among the pods (init containers included). */
  readonly restartCount: number;
  /** The first kubelet waiting reason among the pods' containers (`agent: ImagePullBackOff: ...`); null when none. */
  readonly waiting: string | null;
}

/** `revisions`: DaemonSet name → newest revision hash (null when unknown). */
const NONE: readonly DriverPodSnapshot[] = [];

export function driverPodStatus(node: NodeSnapshot, revisions: ReadonlyMap<string, string | null>): DriverPodStatus {
  const pods = node.driverPods.some((p) => p.deleting) ? node.driverPods.filter((p) => !p.deleting) : node.driverPods;
  let outOfDate: DriverPodSnapshot[] | null = null;
  let revisionUnknown = false;
  let allReady = true;
  let restartCount = 0;
  let waiting: string | null = null;
  for (const pod of pods) {
    waiting ??= pod.waiting === null ? null : `${pod.namespace}/${pod.name} ${pod.waiting}`;
    const newest = revisions.get(pod.daemonSet) ?? null;
    if (newest === null) revisionUnknown = true;
    else if (pod.revisionHash !== newest) (outOfDate ??= []).push(pod);
    if (!pod.ready) allReady = false;
    restartCount = Math.max(restartCount, pod.restartCount);
  }
  const current = pods.length > 0 && outOfDate === null && !revisionUnknown;
  return { pods, outOfDate: outOfDate ?? NONE, revisionUnknown, current, ready: current && allReady, restartCount, waiting };
}
