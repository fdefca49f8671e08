/**
 * The planner: `planUpgrades(snapshot, policy, now)` → Plan. Pure; no I/O, no clock.
 *
 * One pass:
 * 1. Every node runs its state's handler (states/handle-*.ts). A handler either waits (with a
 *    reason and maybe a timer), does nothing, or advances; an advance may chain into the next
 *    state's handler in the same pass when the next decision rests only on facts this pass has
 *    not changed; past its own cordon only behind a check (requireSamePods) that the node's pods
 *    are still those it planned on once the cordon is stored. Nodes that end in upgrade-required are
 *    candidates to start.
 * 2. Halted? (nodes in upgrade-failed, after step 1, >= maxFailedNodes.)
 * 3. The canary of the newest revision is decided (canary-gate.ts): chosen and marked when the
 *    revision is new, judged, and its hold handed to the start checks.
 * 4. Candidates in start order (idle device, priority label, name) go through START_CHECKS; a node
 *    held by one waits with the first hold's reason, and the hold's wake time (a window opening,
 *    a delay ending, a canary's soak ending) joins the plan's next wake time; a node that passes
 *    takes a slot of its pool and starts (→ cordon-required), chaining on. A node
 *    that finds no slot may take one that a node leaving its upgrade in step 1 gives back
 *    (slot-release.ts); its plan then runs only after that node's plan is stored (NodePlan.after).
 * 5. Starts an earlier pass planned and the shell has not sent yet (snapshot.pendingStarts) that a
 *    start check would hold now are revoked (pending-starts.ts, Plan.revokedStarts).
 *
 * A start check's hold may carry a wake time (a soak ending): the plan's nextWakeAt includes it.
 *
 * Gates (autoUpgrade false, skip label, halt, canary, windows, alert gate, pacing, NotReady, pool conflict, slots) apply only to starting: a
 * node that has started always runs to upgrade-done or upgrade-failed, because every later step
 * only gives capacity back, and stopping midway would leave the node cordoned and drained for
 * nothing. (Upstream stops the whole state machine on autoUpgrade false.)
 */
import type { UpgradeState } from '../../shared/keys.ts';
import type { DriverRolloutPolicy } from '../policy/driver-rollout-spec.ts';
import type { NodeAction, NodePlan, NodeReason, Plan, SetStateAction } from './action.ts';
import { assignPool } from './assign-pool.ts';
import { compareCandidates, priorityNumber } from './compare-candidates.ts';
import { usesDevice } from './device-pods.ts';
import { driverPodStatus } from './driver-pod-status.ts';
import { isInUpgradeCycle, isUpgradeRequested, timerKeysOf, cycleAnnotationKeys } from './needs-upgrade.ts';
import { applyNodeObjectAction, createNodeView, readUnixSeconds, toUnixSeconds } from './node-view.ts';
import { stoppedForDependency } from './load-order.ts';
import { holdWhileNotReady } from './node-not-ready.ts';
import { windowStateAt, type WindowState } from './maintenance-windows.ts';
import { cordonLost } from './cordon-lost.ts';
import { isCordonedByAdmin, otherDriverHolds } from './other-drivers.ts';
import { isNodeObjectAction } from './node-patch.ts';
import { countPacing, countSoakStart, createPacing, donePacingActions, recordStart, startPacingActions, startsSoak, type PoolPacing } from './pacing.ts';
import { countMember, createBudget, isInProgress, isOutOfService, isUpgrading, sealBudget, takeSlot, type Membership, type PoolBudget } from './pool-capacity.ts';
import { canRestartOnly, RESTART_ONLY_TEXT } from './restart-only.ts';
import { poolDisruptions } from './pool-disruption.ts';
import { revokedStarts } from './pending-starts.ts';
import { slotReleaseOf, takeReleasedSlot, type SlotRelease } from './slot-release.ts';
import { buildRolloutStatus, startTally, tallyRecord } from './rollout-status.ts';
import { stateLabelMessage } from './state-label-message.ts';
import type { ClusterSnapshot, PdbSnapshot } from './snapshot.ts';
import { alertGateHold } from './alert-gate.ts';
import { firstHold, RESUME_CHECKS, START_CHECKS, type StartContext } from './start-checks.ts';
import { decideCanary } from './canary-gate.ts';
import { handleCordonRequired } from './states/handle-cordon-required.ts';
import { handleDrain } from './states/handle-drain.ts';
import { handlePodDeletion } from './states/handle-pod-deletion.ts';
import { handlePodRestart } from './states/handle-pod-restart.ts';
import { handleUncordon } from './states/handle-uncordon.ts';
import { handleUnknown } from './states/handle-unknown.ts';
import { handleUpgradeDone } from './states/handle-upgrade-done.ts';
import { handleUpgradeFailed } from './states/handle-upgrade-failed.ts';
import { handleUpgradeRequired } from './states/handle-upgrade-required.ts';
import { handleValidation } from './states/handle-validation.ts';
import { handleWaitForJobs } from './states/handle-wait-for-jobs.ts';
import type { NodeContext, Reason, StateHandler, StepContext, StepResult } from './step.ts';

export const STATE_HANDLERS: Readonly<Record<UpgradeState, StateHandler>> = {
  unknown: handleUnknown,
  'upgrade-done': handleUpgradeDone,
  'upgrade-required': handleUpgradeRequired,
  'cordon-required': handleCordonRequired,
  'wait-for-jobs-required': handleWaitForJobs,
  'pod-deletion-required': handlePodDeletion,
  'drain-required': handleDrain,
  'pod-restart-required': handlePodRestart,
  'validation-required': handleValidation,
  'uncordon-required': handleUncordon,
  'upgrade-failed': handleUpgradeFailed,
};

/** More steps than states: a loop guard, never reached by the handlers as written. */
const MAX_STEPS_PER_PASS = 16;

/** What the pass has decided for one node so far. */
export interface NodeRecord {
  readonly node: NodeContext;
  readonly actions: NodeAction[];
  reason: Reason | null;
  wakeAt: number | null;
  /** The node whose plan, once stored, gives back the slot this node's start took (NodePlan.after); null: none. */
  after: string | null;
}

export function planUpgrades(snapshot: ClusterSnapshot, policy: DriverRolloutPolicy, now: number): Plan {
  const revisions = new Map(snapshot.daemonSets.map((d) => [d.name, d.updatedRevisionHash]));
  const window = policy.maintenanceWindows.length === 0 ? null : windowStateAt(policy.maintenanceWindows, now);
  // Budgets from the snapshot as it is, before this pass changes anything: counted as the records are made.
  const budgets = createBudgets(policy);
  const pacing = new Map<string, PoolPacing>([...budgets].map(([name, budget]) => [name, createPacing(budget.pool)]));
  const records: NodeRecord[] = [];
  for (const n of snapshot.nodes) {
    const node: NodeContext = {
      view: createNodeView(n, policy.keys.upgradeState),
      driver: driverPodStatus(n, revisions),
      pool: assignPool(n.labels, policy),
    };
    countInBudget(budgets, node);
    records.push({ node, actions: [], reason: null, wakeAt: null, after: null });
  }
  for (const budget of budgets.values()) sealBudget(budget);
  const ctx: StepContext = {
    policy,
    now,
    revisions,
    fingerprints: new Map(snapshot.daemonSets.map((d) => [d.name, d.templateFingerprint ?? null])),
    signers: new Map(snapshot.daemonSets.map((d) => [d.name, d.templateModuleSigner ?? null])),
    pdbsByNamespace: indexPdbs(snapshot.pdbs),
    dependents: snapshot.dependents ?? [],
    disruptions: poolDisruptions(budgets.values()),
  };
  countPoolPacing(records, pacing, ctx);

  const candidates: NodeRecord[] = [];
  /** Per pool, the slots step 1 gives back once its plans are stored. */
  const releases = new Map<string, SlotRelease[]>();
  let failedNodes = 0;
  for (const record of records) {
    const before = membershipOf(record.node);
    if (runNode(record, ctx) === 'candidate') candidates.push(record);
    // Step 1 changes only the node it runs, so each node's count is final here.
    if (countsAsFailed(record, policy)) failedNodes++;
    collectRelease(releases, record.node, before, soakStartedNow(record.node, before, pacing, now));
  }
  const ordered = inStartOrder(candidates, policy);
  const canary = decideCanary({
    policy,
    now,
    nodes: records.map((r) => r.node),
    candidates: ordered.map((r) => r.node),
    daemonSets: snapshot.daemonSets,
    approval: snapshot.rollout.approval ?? null,
  });
  addCanaryMarks(records, canary.actions);
  // Field by field, not a spread of ctx: a spread's shape is made per pass and dropped with it,
  // and with it the optimised code of the checks and handlers that read the context.
  const startCtx: StartContext = {
    policy: ctx.policy,
    now: ctx.now,
    revisions: ctx.revisions,
    fingerprints: ctx.fingerprints,
    signers: ctx.signers,
    pdbsByNamespace: ctx.pdbsByNamespace,
    dependents: ctx.dependents,
    disruptions: ctx.disruptions,
    failedNodes,
    halted: policy.maxFailedNodes !== null && failedNodes >= policy.maxFailedNodes,
    budgets,
    pacing,
    window,
    canary,
    alertGate: alertGateHold(policy.alertGate, snapshot.alertGate),
  };
  startCandidates(ordered, startCtx, releases);
  const revoked = revokedStarts(records.map((r) => r.node), new Set(snapshot.pendingStarts), startCtx);

  const nodePlans: NodePlan[] = [];
  const reasons: NodeReason[] = [];
  let nextWakeAt = windowChangeAt(window);
  const tally = startTally(budgets, policy);
  for (const record of records) {
    recordReasonAnnotation(record, policy);
    if (record.actions.length > 0) nodePlans.push(toNodePlan(record));
    if (record.reason !== null) reasons.push(toNodeReason(record, record.reason));
    if (record.wakeAt !== null) nextWakeAt = nextWakeAt === null ? record.wakeAt : Math.min(nextWakeAt, record.wakeAt);
    tallyRecord(tally, record);
  }
  const status = buildRolloutStatus({ snapshot, policy, records, budgets, halted: startCtx.halted, tally, window, canary: canary.status, alertGate: startCtx.alertGate });
  return { nodePlans, reasons, nextWakeAt, status, rollback: canary.rollback, revokedStarts: revoked };
}

/** Each pool's last start and soaking nodes, read from its nodes' annotations (pacing.ts). */
function countPoolPacing(records: readonly NodeRecord[], pacing: ReadonlyMap<string, PoolPacing>, ctx: StepContext): void {
  for (const { node } of records) {
    const pool = node.pool.kind === 'pool' ? pacing.get(node.pool.pool.name) : undefined;
    if (pool !== undefined) countPacing(pool, node, ctx);
  }
}

/** The canary's node marks (canary-gate.ts) join each marked node's actions. */
function addCanaryMarks(records: readonly NodeRecord[], marks: ReadonlyMap<string, readonly NodeAction[]>): void {
  if (marks.size === 0) return;
  for (const record of records) {
    const mine = marks.get(record.node.view.snapshot.name);
    if (mine !== undefined) addActions(record, mine);
  }
}

/** A window that opens or closes changes the status (and the holds) with nothing else changed: the plan wakes then. */
function windowChangeAt(window: WindowState | null): number | null {
  if (window === null) return null;
  return window.open ? window.closesAt : window.nextOpening;
}

function indexPdbs(pdbs: readonly PdbSnapshot[]): Map<string, PdbSnapshot[]> {
  const byNamespace = new Map<string, PdbSnapshot[]>();
  for (const pdb of pdbs) {
    const list = byNamespace.get(pdb.namespace);
    if (list === undefined) byNamespace.set(pdb.namespace, [pdb]);
    else list.push(pdb);
  }
  return byNamespace;
}

function createBudgets(policy: DriverRolloutPolicy): Map<string, PoolBudget> {
  const budgets = new Map<string, PoolBudget>([[policy.defaultPool.name, createBudget(policy.defaultPool)]]);
  for (const pool of policy.pools) budgets.set(pool.name, createBudget(pool));
  return budgets;
}

function countInBudget(budgets: ReadonlyMap<string, PoolBudget>, node: NodeContext): void {
  if (node.pool.kind !== 'pool') return;
  const budget = budgets.get(node.pool.pool.name);
  if (budget !== undefined) countMember(budget, membershipOf(node));
}

/** What the node counts against its pool's limits as its view stands (before or after the pass's actions). */
function membershipOf(node: NodeContext): Membership {
  return { state: node.view.state, unschedulable: node.view.unschedulable, ready: node.view.snapshot.ready };
}

/**
 * A node this pass moves into upgrade-done from an upgrade, in a pool that soaks, keeps its
 * parallel slot (pacing.ts): counted as soaking from now on when it held none before (it
 * finished from uncordon-required); when it did, it keeps that one (its release frees no parallel
 * slot: `soaking` true) until the next pass reads its done-time.
 */
function soakStartedNow(node: NodeContext, before: Membership, pacing: ReadonlyMap<string, PoolPacing>, now: number): boolean {
  if (node.pool.kind !== 'pool' || !isInProgress(before.state) || !startsSoak(node)) return false;
  const pool = pacing.get(node.pool.pool.name);
  if (pool !== undefined && !isUpgrading(before.state)) countSoakStart(pool, now);
  return true;
}

function collectRelease(releases: Map<string, SlotRelease[]>, node: NodeContext, before: Membership, soaking: boolean): void {
  if (node.pool.kind !== 'pool') return;
  const freed = slotReleaseOf(node.view.snapshot.name, before, membershipOf(node));
  const release = freed !== null && soaking ? { ...freed, upgrading: false } : freed;
  if (release === null || (!release.upgrading && !release.unavailable)) return;
  const pool = node.pool.pool.name;
  const list = releases.get(pool);
  if (list === undefined) releases.set(pool, [release]);
  else list.push(release);
}

function toNodePlan(record: NodeRecord): NodePlan {
  const node = record.node.view.snapshot.name;
  return record.after === null ? { node, actions: record.actions } : { node, actions: record.actions, after: record.after };
}

/** A failed node being retried still counts until it is done: retries do not free the budget. */
function countsAsFailed(record: NodeRecord, policy: DriverRolloutPolicy): boolean {
  return record.node.view.state === 'upgrade-failed' || record.node.view.annotations[policy.keys.failedRevision] !== undefined;
}

/** The candidates in start order: idle device first, then the priority label, then the name (compare-candidates.ts). */
function inStartOrder(candidates: readonly NodeRecord[], policy: DriverRolloutPolicy): NodeRecord[] {
  const devicePods = policy.devicePods;
  const priorityLabel = policy.priorityLabel;
  return candidates
    .map((record) => {
      const priority = priorityLabel === null ? null : (record.node.view.labels[priorityLabel] ?? null);
      return {
        record,
        name: record.node.view.snapshot.name,
        deviceIdle: !record.node.view.snapshot.pods.some((p) => usesDevice(p, devicePods)),
        priority,
        priorityNumber: priorityNumber(priority),
      };
    })
    .sort(compareCandidates)
    .map((c) => c.record);
}

function startCandidates(ordered: readonly NodeRecord[], ctx: StartContext, releases: ReadonlyMap<string, SlotRelease[]>): void {
  for (const record of ordered) {
    const node = record.node;
    const hold = firstHold(stoppedForDependency(node, ctx) === null ? START_CHECKS : RESUME_CHECKS, node, ctx);
    const budget = node.pool.kind === 'pool' ? ctx.budgets.get(node.pool.pool.name) : undefined;
    const outOfService = isOutOfService(membershipOf(node));
    if (hold !== null) {
      // The slot check comes last: no slot is the only reason left, and a release may end it.
      const from = hold.reason.code === 'no-slot' && budget !== undefined ? takeReleasedSlot(budget, releases.get(budget.pool.name) ?? [], outOfService) : null;
      if (from === null) {
        record.reason = hold.reason;
        // A hold that lifts with time (a window, a delay) wakes the loop then: folded into nextWakeAt.
        record.wakeAt = hold.wakeAt;
        continue;
      }
      record.after = from;
    }
    else if (budget !== undefined) takeSlot(budget, outOfService);
    const paced = budget === undefined ? undefined : ctx.pacing.get(budget.pool.name);
    if (paced !== undefined) recordStart(paced, ctx.now);
    runNode(record, ctx, startResult(node, ctx));
  }
}

/**
 * upgrade-required → cordon-required, or → pod-restart-required when the upgrade is only a
 * restart (restart-only.ts: the template loads the driver already loaded; no cordon, no drain).
 * On a fresh cycle, remember whether the node was already
 * cordoned by an admin (initial-state annotation, written before our cordon; a cordon another
 * driver's unfinished upgrade made is not an admin's) and when the cycle began. A retry of a
 * failed cycle keeps both: the node is cordoned by us then, not by an admin.
 */
function startResult(node: NodeContext, ctx: StepContext): StepResult {
  const keys = ctx.policy.keys;
  const name = node.view.snapshot.name;
  const a = node.view.annotations;
  const actions: NodeAction[] = [];
  // Step timers left by an earlier attempt (a crash between two writes) must not shorten this one.
  for (const key of cycleAnnotationKeys(keys)) {
    if (key !== keys.upgradeStartTime && a[key] !== undefined) actions.push({ kind: 'removeAnnotation', node: name, key });
  }
  if (!isInUpgradeCycle(a, keys)) {
    // Other drivers' holds matter only for a cordoned node (isCordonedByAdmin).
    if (node.view.unschedulable && isCordonedByAdmin(true, otherDriverHolds(node.view.labels, a, keys))) {
      actions.push({ kind: 'setAnnotation', node: name, key: keys.initialStateUnschedulable, value: 'true' });
    }
    else if (a[keys.initialStateUnschedulable] !== undefined) actions.push({ kind: 'removeAnnotation', node: name, key: keys.initialStateUnschedulable });
    actions.push({ kind: 'setAnnotation', node: name, key: keys.upgradeStartTime, value: toUnixSeconds(ctx.now) });
  }
  actions.push(...startPacingActions(node, ctx));
  if (isUpgradeRequested(a, keys)) actions.push({ kind: 'removeAnnotation', node: name, key: keys.upgradeRequested });
  if (a[keys.stoppedFor] !== undefined) actions.push({ kind: 'removeAnnotation', node: name, key: keys.stoppedFor });
  const unchanged = canRestartOnly(node, ctx);
  if (unchanged !== null) {
    actions.push({ kind: 'setAnnotation', node: name, key: keys.restartOnly, value: 'true' });
    const message = `${RESTART_ONLY_TEXT}: the new template loads ${unchanged.version} with the same modules and parameters as loaded by ${unchanged.pod}; restarting the driver pod without cordon or drain`;
    const event: NodeAction = { kind: 'emitEvent', node: name, type: 'Normal', reason: ctx.policy.eventReason, message };
    return { kind: 'advance', to: 'pod-restart-required', actions, chain: true, after: [event] };
  }
  return { kind: 'advance', to: 'cordon-required', actions, chain: true };
}

/** Runs handlers from the node's current state (or from `first`) until it waits, idles or stops chaining. */
function runNode(record: NodeRecord, ctx: StepContext, first?: StepResult): 'candidate' | 'settled' {
  let next = first;
  /** The "updated node state label" Event of the state this pass moved the node into, if any. */
  let entered: NodeAction | null = null;
  for (let step = 0; step < MAX_STEPS_PER_PASS; step++) {
    const result = next ?? stopped(record.node, ctx) ?? cordonLost(record.node, ctx) ?? holdWhileNotReady(record.node, ctx) ?? STATE_HANDLERS[record.node.view.state](record.node, ctx);
    next = undefined;
    if (result.kind !== 'advance') addActions(record, result.actions);
    switch (result.kind) {
      case 'idle':
        return 'settled';
      case 'candidate':
        return 'candidate';
      case 'wait':
        record.reason = result.reason;
        record.wakeAt = result.wakeAt;
        return 'settled';
      case 'advance':
        if (entered !== null && isPassThrough(result)) dropAction(record, entered);
        entered = transition(record, result, ctx);
        if (!result.chain) return 'settled';
    }
  }
  return 'settled';
}

const STOPPED_TEXT = 'stopped: upgradePolicy.stop is true (clear it to resume here)';

/**
 * Emergency stop: a node that has an upgrade to do or under way stays in its state and nothing
 * is done to it; its step timer is dropped so that, on resume, the step's timeout counts afresh.
 * A failed node keeps its failure as the reason. Unknown and upgrade-done nodes are still
 * labelled (no action on the node's workloads), so the status stays true.
 */
function stopped(node: NodeContext, ctx: StepContext): StepResult | null {
  const state = node.view.state;
  if (!ctx.policy.stop || state === 'unknown' || state === 'upgrade-done') return null;
  if (state === 'upgrade-failed') {
    const message = node.view.annotations[ctx.policy.keys.upgradeReason] ?? 'upgrade failed';
    return { kind: 'wait', actions: [], reason: { code: 'upgrade-failed', message, detail: `${message} (${STOPPED_TEXT})` }, wakeAt: null };
  }
  const drops: NodeAction[] = timerKeysOf(state, ctx.policy.keys)
    .filter((key) => node.view.annotations[key] !== undefined)
    .map((key) => ({ kind: 'removeAnnotation', node: node.view.snapshot.name, key }));
  return { kind: 'wait', actions: drops, reason: { code: 'stopped', message: STOPPED_TEXT, detail: STOPPED_TEXT }, wakeAt: null };
}

/**
 * A state left in the same pass it was entered, with nothing done in it (its step is off or had
 * nothing to do: no pod to delete, drain disabled). The executor writes the pass as one patch, so
 * its label is never stored, and no Event of its own is sent for it: the Event of the write that
 * stores a later state names it (state-label-message.ts).
 */
function isPassThrough(result: Extract<StepResult, { kind: 'advance' }>): boolean {
  return result.actions.length === 0 && result.warning === undefined && (result.after ?? []).length === 0;
}

function dropAction(record: NodeRecord, action: NodeAction): void {
  const at = record.actions.lastIndexOf(action);
  if (at !== -1) record.actions.splice(at, 1);
}

/** Adds the transition's actions; returns its "updated node state label" Event. */
function transition(record: NodeRecord, result: Extract<StepResult, { kind: 'advance' }>, ctx: StepContext): NodeAction {
  const view = record.node.view;
  const keys = ctx.policy.keys;
  const name = view.snapshot.name;
  const from = view.state;
  addActions(record, result.actions);
  const kept = timerKeysOf(result.to, keys);
  const change: SetStateAction = {
    kind: 'setState',
    node: name,
    labelKey: keys.upgradeState,
    from,
    to: result.to,
    fromSince: readUnixSeconds(view.annotations, keys.stateStartTime),
    upgradeStartedAt: result.to === 'upgrade-done' ? readUnixSeconds(view.annotations, keys.upgradeStartTime) : null,
  };
  const actions: NodeAction[] = [result.skipped === undefined ? change : { ...change, skipped: result.skipped }];
  for (const key of timerKeysOf(from, keys)) {
    if (!kept.includes(key) && view.annotations[key] !== undefined) actions.push({ kind: 'removeAnnotation', node: name, key });
  }
  actions.push({ kind: 'setAnnotation', node: name, key: keys.stateStartTime, value: toUnixSeconds(ctx.now) });
  if (result.to === 'upgrade-done' && isInProgress(from)) actions.push(...donePacingActions(record.node, ctx));
  const event: NodeAction = {
    kind: 'emitEvent',
    node: name,
    type: 'Normal',
    reason: ctx.policy.eventReason,
    message: stateLabelMessage(result.to),
    reportsState: result.to,
  };
  actions.push(event);
  if (result.warning !== undefined) {
    actions.push({ kind: 'emitEvent', node: name, type: 'Warning', reason: ctx.policy.eventReason, message: result.warning });
  }
  addActions(record, actions);
  if (result.after !== undefined) addActions(record, result.after);
  return event;
}

function addActions(record: NodeRecord, actions: readonly NodeAction[]): void {
  for (const action of actions) {
    record.actions.push(action);
    if (isNodeObjectAction(action)) applyNodeObjectAction(record.node.view, action);
  }
}

/** Keeps the node's reason annotation equal to the stable message (no write when unchanged). */
function recordReasonAnnotation(record: NodeRecord, policy: DriverRolloutPolicy): void {
  const key = policy.keys.upgradeReason;
  const name = record.node.view.snapshot.name;
  const current = record.node.view.annotations[key];
  if (record.reason === null) {
    if (current !== undefined) addReasonAction(record, { kind: 'removeAnnotation', node: name, key });
    return;
  }
  if (current !== record.reason.message) addReasonAction(record, { kind: 'setAnnotation', node: name, key, value: record.reason.message });
}

/**
 * Adds the reason annotation's change right after the node's last node-object action, before any
 * trailing pod action or Event: the executor then writes it in the same patch as the pass's state
 * change instead of in a patch of its own after the pod action. The reason is informational; it
 * may be stored a moment before the deletion it describes is sent.
 */
function addReasonAction(record: NodeRecord, action: NodeAction): void {
  let at = record.actions.length;
  while (at > 0) {
    const previous = record.actions[at - 1];
    if (previous === undefined || isNodeObjectAction(previous)) break;
    at -= 1;
  }
  // A list of pod actions only (a node waiting on a deletion or eviction) keeps the reason last.
  if (at === 0) at = record.actions.length;
  record.actions.splice(at, 0, action);
  if (isNodeObjectAction(action)) applyNodeObjectAction(record.node.view, action);
}

function toNodeReason(record: NodeRecord, reason: Reason): NodeReason {
  const pool = record.node.pool;
  return {
    node: record.node.view.snapshot.name,
    state: record.node.view.state,
    pool: pool.kind === 'pool' ? pool.pool.name : null,
    code: reason.code,
    message: reason.message,
    detail: reason.detail,
  };
}
