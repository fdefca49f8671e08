/**
 * The plain-data view of the cluster that the planner reads: one DriverRollout's managed nodes,
 * the pods on them, the driver DaemonSets' newest revisions and the PodDisruptionBudgets.
 *
 * Built by the shell from informer caches, with no API call; nothing here is a live object.
 * Contract for the builder:
 * - `nodes`: every node that has a driver pod of this rollout, or carries this driver's state
 *   label (any value but `unknown`), or its wait-for-safe-load annotation. A node in no pool and
 *   in two pools alike is included; the planner sorts pools out.
 * - `NodeSnapshot.pods`: every pod bound to the node (`spec.nodeName`), any namespace and phase,
 *   except the driver pods, which are in `driverPods`. Index pods by node once, in the informer
 *   handlers; do not filter by policy: the planner does that.
 * - The snapshot must include the effects of every write the shell made in earlier passes (wait
 *   until the informers have seen them, or overlay them with `applyPlan`); otherwise a pass
 *   could count a node it started a moment ago as not started and exceed a limit.
 */
import type { DevicePodPolicy } from '../policy/driver-rollout-spec.ts';
import type { Selector } from '../policy/label-selector.ts';

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';

export interface PodRef {
  readonly namespace: string;
  readonly name: string;
  /** Sent as a precondition on delete/evict so a pod recreated with the same name is left alone. */
  readonly uid: string;
}

export interface PodSnapshot extends PodRef {
  readonly labels: Readonly<Record<string, string>>;
  readonly phase: PodPhase;
  /** The pod's Ready condition is True. */
  readonly ready: boolean;
  /** `metadata.deletionTimestamp` is set. */
  readonly deleting: boolean;
  /** Kind of the controller owner reference (`ReplicaSet`, `Job`, `DaemonSet`, ...); null when no controller. */
  readonly controllerKind: string | null;
  /** Name of the controller owner reference (the DaemonSet's name for a DaemonSet pod); absent or null when none. */
  readonly controllerName?: string | null | undefined;
  /**
   * `metadata.creationTimestamp`, ms since epoch (whole seconds, as the API stores it); absent or
   * null when unknown, then the pod counts as older than any step (device-clients.ts).
   */
  readonly createdAt?: number | null | undefined;
  /** A static pod's mirror (annotation `kubernetes.io/config.mirror`): the API cannot remove it. */
  readonly mirror: boolean;
  /** Has an emptyDir volume (its data is lost on eviction). */
  readonly usesEmptyDir: boolean;
  /** Every resource name in `requests` or `limits` of any container or init container. */
  readonly resourceNames: readonly string[];
  /**
   * Node label keys the pod requires: its `nodeSelector` keys and the keys of its required node
   * affinity (a DaemonSet pod carries its template's). A GPU Operator operand requires its
   * `nvidia.com/gpu.deploy.<operand>` label, so pausing that label removes it from the node.
   */
  readonly nodeLabelKeys: readonly string[];
  /**
   * The last eviction of this pod was refused (HTTP 429, e.g. a PDB): when (ms since epoch) and
   * the API's message. Reported by the executor and kept in the shell's memory only; after a
   * restart it is absent and the eviction is simply tried again.
   */
  readonly evictionBlocked?: { readonly at: number; readonly message: string } | undefined;
}

/** The agent's readiness-gate condition (`<domain>/<driver>-driver-ready`) on its pod. */
export interface AgentConditionSnapshot {
  readonly status: 'True' | 'False' | 'Unknown';
  /** One CamelCase word: `Building`, `Loaded`, `CompileFailed`, `DriverInUse`, ... */
  readonly reason: string;
  readonly message: string;
}

export interface DriverPodSnapshot extends PodRef {
  /** Name of the owning DaemonSet (in the rollout's namespace). */
  readonly daemonSet: string;
  /** The pod's `controller-revision-hash` label; null when missing. */
  readonly revisionHash: string | null;
  readonly phase: PodPhase;
  readonly ready: boolean;
  /** Highest restartCount over the pod's containers and init containers (upstream counts both). */
  readonly restartCount: number;
  readonly deleting: boolean;
  /** The agent's readiness-gate condition; null until the agent has written it. */
  readonly agentCondition: AgentConditionSnapshot | null;
  /**
   * Why a container or init container is not running, as the kubelet says it
   * (`init container wait: CrashLoopBackOff: back-off 5m0s ...`, `agent: ImagePullBackOff: ...`);
   * null when none waits for such a reason. ContainerCreating and PodInitializing are not reasons.
   */
  readonly waiting: string | null;
}

export interface DaemonSetSnapshot {
  readonly namespace: string;
  readonly name: string;
  /**
   * `controller-revision-hash` of the DaemonSet's newest ControllerRevision (highest `revision`
   * among those it owns); null when none is known yet (then no pod of it is judged out of date).
   */
  readonly updatedRevisionHash: string | null;
  /**
   * The driver the newest revision's template loads (shared/driver-identity.ts fingerprint);
   * null or absent when the template does not say it plainly: no restart-only path then.
   */
  readonly templateFingerprint?: string | null | undefined;
  /**
   * Who signed the modules the newest revision's template loads, as it declares
   * (shared/keys.ts MODULE_SIGNER_ANNOTATION: a signer's name, or `unsigned`); null or absent
   * when it does not say: its nodes are then judged only by the agents' verdicts.
   */
  readonly templateModuleSigner?: string | null | undefined;
  /** The hash of the ControllerRevision just below the newest (by `revision`); null or absent when there is none. What a canary rollback puts back. */
  readonly previousRevisionHash?: string | null | undefined;
  /**
   * The newest ControllerRevision is an older one made newest again (created before one with a
   * lower `revision`): a rollback, `kubectl rollout undo`. Its template ran before; no canary.
   */
  readonly newestIsRollback?: boolean | undefined;
}

export interface PdbSnapshot {
  readonly namespace: string;
  readonly name: string;
  /** policy/v1: an empty selector selects every pod of the namespace; null (no selector) selects none. */
  readonly selector: Selector | null;
  /** `status.disruptionsAllowed`. */
  readonly disruptionsAllowed: number;
}

/** What the agent says is loaded (its `driver-rollout.io/<driver>-driver-loaded` annotation, read by the shell). */
export interface LoadedDriverSnapshot {
  /** `namespace/name` of the driver pod whose agent loaded it. */
  readonly pod: string;
  /** shared/driver-identity.ts driverFingerprint: compared with DaemonSetSnapshot.templateFingerprint. */
  readonly fingerprint: string;
  readonly version: string;
}

/** A node's Ready condition that is not True. */
export interface NodeNotReadySnapshot {
  /** `Unknown` (the node controller's word for a kubelet that stopped reporting) or `False` (the kubelet's own). */
  readonly status: string;
  readonly reason: string;
  readonly message: string;
  /** The condition's lastTransitionTime, ms since epoch; null when missing. */
  readonly since: number | null;
}

export interface NodeSnapshot {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** `spec.unschedulable` (cordoned). */
  readonly unschedulable: boolean;
  /** The node's Ready condition is True. */
  readonly ready: boolean;
  /** `status.nodeInfo.kernelVersion`, the running kernel as the kubelet reports it; null or absent when unknown. */
  readonly kernelVersion?: string | null | undefined;
  /**
   * When `ready` is false: the Ready condition as the API has it (node-not-ready.ts reads it);
   * null or absent when unknown (a node without a Ready condition, or a test that does not say).
   */
  readonly notReady?: NodeNotReadySnapshot | null | undefined;
  /** Pods of the rollout's driver DaemonSet(s) on this node, terminating ones included. */
  readonly driverPods: readonly DriverPodSnapshot[];
  /** Every other pod bound to the node. */
  readonly pods: readonly PodSnapshot[];
  /** The agent's loaded-driver annotation, parsed; null or absent when missing or unreadable. */
  readonly loadedDriver?: LoadedDriverSnapshot | null | undefined;
}

export interface RolloutRef {
  readonly namespace: string;
  readonly name: string;
  readonly generation: number;
  /**
   * The canary approval on the DriverRollout (shared/keys.ts CANARY_APPROVED_REVISION_ANNOTATION
   * and CANARY_APPROVED_BY_ANNOTATION, written by `kubectl driver-rollout approve`); absent or
   * null when there is none.
   */
  readonly approval?: { readonly revision: string; readonly by: string } | null | undefined;
}

export interface ClusterSnapshot {
  readonly rollout: RolloutRef;
  readonly nodes: readonly NodeSnapshot[];
  /** The driver DaemonSets the rollout's selector picks, in its namespace. */
  readonly daemonSets: readonly DaemonSetSnapshot[];
  /** Every PodDisruptionBudget in the cluster (the planner indexes them by namespace). */
  readonly pdbs: readonly PdbSnapshot[];
  /**
   * Drivers, in this rollout's keyDomain, whose DriverRollouts load after this one (their
   * `loadsAfter` names this driver), by driver name: loaded on a node, they are stopped before
   * this one reloads there (load-order.ts). Absent: none.
   */
  readonly dependents?: readonly DependentDriverSnapshot[];
  /**
   * The alert gate's last reading (spec.alertGate), taken by the leader's poller; absent or null
   * when the rollout has no gate or the poller has not answered yet (then a gate holds: it fails
   * closed). plan/alert-gate.ts judges it.
   */
  readonly alertGate?: AlertGateReading | null;
  /**
   * Nodes whose start an earlier pass planned and the shell has not sent yet: a start waiting for
   * the plan whose slot it took (NodePlan.after) or for room among the writes under way. The
   * snapshot shows them started (the shell overlays the start); the planner revokes those a start
   * check would hold now (Plan.revokedStarts, pending-starts.ts). Absent: none.
   */
  readonly pendingStarts?: readonly string[];
}

/** A driver whose DriverRollout loads after this rollout's driver, as the dependency's restart needs it. */
export interface DependentDriverSnapshot {
  readonly driver: string;
  /** Its rollout's driver DaemonSets, `<namespace>/<name>`: their pods on a node are what the dependency's restart stops. */
  readonly daemonSets: readonly string[];
  /** Its rollout's device pods: while one runs on the node, its driver is not stopped there. */
  readonly devicePods: DevicePodPolicy;
}

/** One alert Prometheus reports as firing (`state: firing`; pending ones are not read). */
export interface FiringAlert {
  /** Its `alertname` label. */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

/**
 * What the alert gate's last poll of Prometheus's alerts API gave: the alerts firing then, or why
 * it could not be read (unreachable, timed out, an HTTP error, an answer that is not the API's,
 * the token's or CA's Secret unreadable). The problem text never holds the bearer token.
 */
export type AlertGateReading =
  | { readonly kind: 'answered'; readonly firing: readonly FiringAlert[] }
  | { readonly kind: 'unanswered'; readonly problem: string };
