/**
 * What one planning pass decides, as data: per-node action lists, why nodes wait, when to wake
 * up next, and the DriverRollout status.
 *
 * Executor contract (keeps the executor thin and idempotent):
 * - `nodePlans` of different nodes are independent and may run concurrently.
 * - The actions of one node run in order; on the first failure the rest of that node's list is
 *   dropped (the next pass re-plans from what the cluster then shows). The planner orders every
 *   list so that stopping after any action, or a crash there, leaves a state the next pass
 *   continues safely from (e.g. the initial-state annotation is written before the cordon, the
 *   state label is written before the node is uncordoned).
 * - One exception to the order: a deleteDriverPod right after a patch that neither cordons nor
 *   raises a limited count (a cordoned, upgrading node moving on to pod-restart-required) may be
 *   sent beside that patch (coordinator/execute/driver-deletion-beside.ts); the pod-restart step
 *   deletes only out-of-date driver pods, so either write alone is a state to continue from.
 * - Consecutive node-object actions (setState, cordon, uncordon, setAnnotation,
 *   removeAnnotation, clearSafeLoad) may be merged into one merge patch of the Node
 *   (`nodePatchOf` in node-patch.ts); that is equivalent and atomic. Events between them may be
 *   sent after that patch (they change nothing the planner reads).
 * - requireSamePods is a check, not a write: it ends the node's list (as done, not failed) when
 *   the node's pods in the cache are no longer those the plan was made on. A pass that cordons
 *   a node plans its next steps from pods seen before the cordon was stored; placed after the
 *   cordon's patch, the check lets those steps go on only if the pods seen once the cordon is
 *   answered are the same, as a pass planned then would see them.
 * - Every action is idempotent: setting a value that is already there, deleting or evicting a
 *   pod that is gone (404) or whose UID differs (409 precondition) is success.
 * - evictPod: HTTP 429 is not a failure of the node's list; report it back in the next snapshot
 *   as `PodSnapshot.evictionBlocked` and carry on with the node's remaining actions.
 * - Limits are computed conservatively: any subset of the plan executed in any order stays
 *   within limits. A slot this plan frees is handed on in the same plan only to a node plan that
 *   names the freeing node in `after`: the executor starts that plan only once the freeing node's
 *   plan of the same pass has been carried out in full, and drops it (as done, not failed: the
 *   next pass plans the node afresh) when that plan failed, was not started, or was cut short.
 */
import type { UpgradeState } from '../../shared/keys.ts';
import type { PodRef } from './snapshot.ts';

export interface SetStateAction {
  readonly kind: 'setState';
  readonly node: string;
  /** The state label key, e.g. `nvidia.com/gpu-driver-upgrade-state`. */
  readonly labelKey: string;
  readonly from: UpgradeState;
  readonly to: UpgradeState;
  /** When the node entered `from` (ms since epoch; from the state-start-time annotation), for the per-state histogram. */
  readonly fromSince: number | null;
  /** Set when `to` is upgrade-done: when this node's upgrade began (ms), for the per-node duration histogram. */
  readonly upgradeStartedAt: number | null;
  /**
   * Set when `from` is left in the pass that entered it with nothing done there (its step off or
   * with nothing to do): why, e.g. "no job pods to wait for". Named in the Event of the write
   * that stores a later state (state-label-message.ts).
   */
  readonly skipped?: string;
}

/**
 * Cordon on behalf of `holder` (cordon-holders.ts): written against the node as read, with its
 * resourceVersion, never over another writer's change.
 */
export interface CordonAction {
  readonly kind: 'cordon';
  readonly node: string;
  /** `<keyDomain>/<driverName>` (shared/keys.ts cordonHolderOf). */
  readonly holder: string;
}

/** `holder` lets go of the node's cordon; the node is uncordoned only if no other holder is left (cordon-holders.ts). */
export interface UncordonAction {
  readonly kind: 'uncordon';
  readonly node: string;
  readonly holder: string;
}

export interface SetAnnotationAction {
  readonly kind: 'setAnnotation';
  readonly node: string;
  readonly key: string;
  readonly value: string;
}

export interface RemoveAnnotationAction {
  readonly kind: 'removeAnnotation';
  readonly node: string;
  readonly key: string;
}

/** A node label other than the state label (operand pausing: `nvidia.com/gpu.deploy.<operand>`). */
export interface SetLabelAction {
  readonly kind: 'setLabel';
  readonly node: string;
  readonly key: string;
  readonly value: string;
}

/** Safe load: remove the wait-for-safe-load annotation so the driver pod's init container lets it load. */
export interface ClearSafeLoadAction {
  readonly kind: 'clearSafeLoad';
  readonly node: string;
  readonly key: string;
}

/** Delete a pod outright (no PDB is consulted). */
export interface DeletePodAction {
  readonly kind: 'deletePod';
  readonly node: string;
  readonly pod: PodRef;
}

/** Evict a pod through the Eviction API (pod deletion and drain steps), which honours PodDisruptionBudgets. */
export interface EvictPodAction {
  readonly kind: 'evictPod';
  readonly node: string;
  readonly pod: PodRef;
}

/** Delete the out-of-date driver pod; its DaemonSet (updateStrategy OnDelete) recreates it at the new revision. */
export interface DeleteDriverPodAction {
  readonly kind: 'deleteDriverPod';
  readonly node: string;
  readonly pod: PodRef;
}

/** A Kubernetes Event on the Node, reason e.g. `GPUDriverUpgrade`. */
export interface EmitEventAction {
  readonly kind: 'emitEvent';
  readonly node: string;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
  /**
   * The state whose label write this Event reports ("Successfully updated node state label to
   * [X]"): the executor sends it only if the write stores that state (see coalesceNodeActions).
   */
  readonly reportsState?: UpgradeState;
}

/**
 * Go on only if the node's pods (driver pods included, by UID) are those listed: what the steps
 * after a cordon decided from (wait for jobs, pod deletion, drain, the device-in-use hold).
 */
export interface RequireSamePodsAction {
  readonly kind: 'requireSamePods';
  readonly node: string;
  readonly podUids: readonly string[];
}

export type NodeObjectAction =
  | SetStateAction
  | CordonAction
  | UncordonAction
  | SetAnnotationAction
  | RemoveAnnotationAction
  | SetLabelAction
  | ClearSafeLoadAction;

export type NodeAction = NodeObjectAction | DeletePodAction | EvictPodAction | DeleteDriverPodAction | EmitEventAction | RequireSamePodsAction;

export interface NodePlan {
  readonly node: string;
  /** In execution order; see the executor contract above. */
  readonly actions: readonly NodeAction[];
  /**
   * The node whose plan in the same pass gives back the slot this plan takes (a start handed the
   * slot of a node leaving its upgrade: plan/slot-release.ts): carry this plan out only once that
   * one has been, in full. Absent: no such wait.
   */
  readonly after?: string;
}

/**
 * Why a node waits, as a category (the text people see is NodeReason.message). Each has an entry
 * in docs/runbook.md (test/unit/docs/runbook.test.ts).
 */
export const REASON_CODES = [
  'paused',
  'stopped',
  'halted',
  'outside-maintenance-window',
  'start-delay',
  'upgrade-soak',
  'alert-firing',
  'alert-gate-unreachable',
  'skipped',
  'pool-conflict',
  'no-slot',
  'no-driver-pod',
  'module-signature-untrusted',
  'revision-unknown',
  'waiting-for-jobs',
  'waiting-for-pod-deletion',
  'waiting-for-eviction',
  'eviction-blocked',
  'drain-blocked',
  'waiting-for-driver-pod',
  'driver-failing',
  'device-in-use',
  'load-order',
  'waiting-for-clients',
  'waiting-for-validation',
  'node-not-ready',
  'pool-not-ready',
  'upgrade-failed',
  'canary',
  'waiting-for-approval',
  'canary-soaking',
  'canary-failed',
] as const;
export type ReasonCode = (typeof REASON_CODES)[number];

/** Why a node is not moving. */
export interface NodeReason {
  readonly node: string;
  readonly state: UpgradeState;
  readonly pool: string | null;
  readonly code: ReasonCode;
  /**
   * Stable text (no elapsed time), written to the node's reason annotation and the status: it
   * changes only when the situation does, so it causes no write per pass.
   */
  readonly message: string;
  /** Live text with counts and elapsed time, e.g. "waiting for job pods: ns/a, ns/b (120s of 600s)", for status, logs and the CLI. */
  readonly detail: string;
}

export type ConditionType = 'Progressing' | 'Complete' | 'Paused' | 'Stopped' | 'Halted' | 'InvalidSpec' | 'CanaryApproved' | 'CanaryFailed';

/** lastTransitionTime and observedGeneration are added by the status writer, which knows the previous status. */
export interface RolloutCondition {
  readonly type: ConditionType;
  readonly status: 'True' | 'False';
  readonly reason: string;
  readonly message: string;
}

export interface PoolStatus {
  readonly name: string;
  /** Managed nodes in the pool. */
  readonly total: number;
  /** Out of service now: cordoned, NotReady or upgrading. */
  readonly unavailable: number;
  /** maxUnavailable resolved against `total`. */
  readonly maxUnavailable: number;
  /** In cordon-required … uncordon-required. */
  readonly inProgress: number;
  /** 0 = unlimited; counts cordon-required … validation-required. */
  readonly maxParallelUpgrades: number;
  readonly done: number;
  readonly failed: number;
  readonly pending: number;
}

export interface NodeCounts {
  readonly total: number;
  /** In upgrade-done with a current driver pod. */
  readonly done: number;
  readonly failed: number;
  /** In cordon-required … uncordon-required. */
  readonly inProgress: number;
  /** In upgrade-required (waiting to start). */
  readonly pending: number;
  /** How many more nodes could start now (free slots, summed over pools); 0 while paused or halted. */
  readonly available: number;
}

/** The DriverRollout `.status` (see manifests/driverrollout-crd.yaml), less what the status writer adds. */
export interface RolloutStatus {
  readonly observedGeneration: number;
  readonly driverName: string;
  /** "done/total", for the printer column. */
  readonly progress: string;
  readonly paused: boolean;
  /** upgradePolicy.stop: no node moves. */
  readonly stopped: boolean;
  readonly halted: boolean;
  readonly nodes: NodeCounts;
  /** Nodes per state label value. */
  readonly states: Readonly<Record<UpgradeState, number>>;
  readonly pools: readonly PoolStatus[];
  readonly conditions: readonly RolloutCondition[];
  /** Up to MAX_WAITING_IN_STATUS waiting nodes with their stable reason message, node-specific reasons first, then by name. */
  readonly waiting: readonly { readonly node: string; readonly state: UpgradeState; readonly reason: string }[];
  /**
   * Up to MAX_WAITING_IN_STATUS nodes, by name, whose agent reports that the driver does not
   * build for another installed kernel (`<driver>-driver.next-kernel=failed`): a reboot into it
   * would leave them without the driver. `kernel` is the newest failing one the agent named.
   */
  readonly nextKernelFailing: readonly { readonly node: string; readonly kernel: string }[];
  /** The canary of the newest revision; absent or null when none holds it (no canary configured, a rollback, nothing to upgrade). */
  readonly canary?: CanaryStatus | null;
  /** upgradePolicy.maintenanceWindows as of this pass. */
  readonly maintenanceWindow: MaintenanceWindowStatus;
  /** spec.alertGate's verdict this pass; absent without a gate. */
  readonly alertGate?: AlertGateStatus;
}

/** Whether the alert gate lets nodes start: `open`, `firing` (a matching alert fires) or `unreachable` (Prometheus cannot be asked: fails closed). */
export interface AlertGateStatus {
  readonly state: 'open' | 'firing' | 'unreachable';
  readonly message: string;
}

/**
 * Whether a maintenance window is open and when that changes, RFC 3339 in UTC. '' is "none": no
 * windows (always open), or nothing within the next week. Every field is always written: the
 * status is stored with a merge patch, which would keep a field left out.
 */
export interface MaintenanceWindowStatus {
  readonly open: boolean;
  /** While open: when the open span closes. */
  readonly closesAt: string;
  /** The next opening (after the open span, while open). */
  readonly nextOpening: string;
  /** The window that opens next, with that opening in its own zone: `Sat 22:00-04:00 Europe/Berlin (2026-03-28T22:00:00)`. */
  readonly nextWindow: string;
}

export const MAX_WAITING_IN_STATUS = 50;

/**
 * Where the canary of the newest revision stands (plan/canary-gate.ts): its nodes upgrading
 * (Canary), done and waiting for a person (WaitingForApproval) or for time (Soaking), passed
 * (Rolling: the rest go on within the limits), or failed (CanaryFailed: the rest wait).
 */
export const CANARY_PHASES = ['Canary', 'WaitingForApproval', 'Soaking', 'Rolling', 'CanaryFailed'] as const;
export type CanaryPhase = (typeof CANARY_PHASES)[number];

export interface CanaryStatus {
  /** The rollout revision the canary is for: `<daemonset>=<hash>`, sorted, comma-separated; what `approve` approves. */
  readonly revision: string;
  readonly phase: CanaryPhase;
  /** The canary nodes, by name. */
  readonly nodes: readonly string[];
  /** Who approved this revision (the DriverRollout's annotation); null: not approved. */
  readonly approvedBy: string | null;
  /** With then: Continue, when the soak ends (ms since epoch; the stored status has it as RFC 3339); null before every canary node is done. */
  readonly soakUntil: number | null;
  /** Why the canary failed; null unless CanaryFailed. */
  readonly failure: string | null;
  /** `<daemonset>: <from hash> → <to hash>` of the rollback asked for (onCanaryFailure: Rollback); null: none. */
  readonly rollback: string | null;
}

/** Put a driver DaemonSet's template back to an older ControllerRevision's (onCanaryFailure: Rollback). */
export interface RollbackRequest {
  readonly daemonSets: readonly { readonly name: string; readonly fromRevisionHash: string; readonly toRevisionHash: string }[];
  /** The canary's failure. */
  readonly reason: string;
}

export interface Plan {
  /** Only nodes with at least one action. */
  readonly nodePlans: readonly NodePlan[];
  /** Every managed node that is not moving in this pass and why. */
  readonly reasons: readonly NodeReason[];
  /**
   * Earliest time (ms since epoch) at which a pass could decide something new without any change
   * in the cluster (a timeout, an eviction retry); null when only a change can. Schedule a timer.
   */
  readonly nextWakeAt: number | null;
  readonly status: RolloutStatus;
  /** A failed canary to roll back (onCanaryFailure: Rollback); absent or null: none. The shell applies it from its ControllerRevisions. */
  readonly rollback?: RollbackRequest | null;
  /**
   * Starts of ClusterSnapshot.pendingStarts that a start check holds now (the pool went NotReady,
   * the node did, the rollout was paused...): the shell drops each one not sent yet, and the next
   * pass plans the node afresh from upgrade-required. A start already sent is not revoked.
   */
  readonly revokedStarts: readonly RevokedStart[];
}

/** A planned start that a newer pass would hold: the node and why (the hold's reason). */
export interface RevokedStart {
  readonly node: string;
  readonly code: ReasonCode;
  readonly message: string;
}
