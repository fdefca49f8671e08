/**
 * The DriverRollout status a pass computes: counts, pools, conditions, the first waiting nodes.
 */
import { driverKeys, NEXT_KERNEL_FAILED, UPGRADE_STATES, type DriverKeys, type UpgradeState } from '../../shared/keys.ts';
import type { DriverRolloutPolicy } from '../policy/driver-rollout-spec.ts';
import { formatInstant } from '../policy/zoned-time.ts';
import type { WindowState } from './maintenance-windows.ts';
import { MAX_WAITING_IN_STATUS, type AlertGateStatus, type CanaryStatus, type MaintenanceWindowStatus, type ReasonCode, type RolloutCondition, type RolloutStatus, type PoolStatus } from './action.ts';
import { freeSlots, isInProgress, isOutOfService, type PoolBudget } from './pool-capacity.ts';
import { isKnownByName } from './nodes-by-name.ts';
import type { ClusterSnapshot } from './snapshot.ts';
import type { NodeRecord } from './plan-upgrades.ts';
import type { StartHold } from './start-checks.ts';

/** Reasons that hold many nodes at once and say little about any one of them: listed last. */
const ROLLOUT_WIDE: ReadonlySet<ReasonCode> = new Set<ReasonCode>(['no-slot', 'paused', 'stopped', 'halted', 'skipped', 'canary', 'waiting-for-approval', 'canary-soaking', 'canary-failed', 'alert-firing', 'alert-gate-unreachable', 'outside-maintenance-window', 'start-delay', 'upgrade-soak']);

export interface StatusInput {
  readonly snapshot: ClusterSnapshot;
  readonly policy: DriverRolloutPolicy;
  /** One per snapshot node, in its order. */
  readonly records: readonly NodeRecord[];
  readonly budgets: ReadonlyMap<string, PoolBudget>;
  readonly halted: boolean;
  /** The alert gate's hold this pass (alert-gate.ts); null: open, or no gate. */
  readonly alertGate: StartHold | null;
  /** Every record counted (tallyRecord) once the pass has decided for it. */
  readonly tally: StatusTally;
  /** null: no maintenance windows. */
  readonly window: WindowState | null;
  /** The canary of the newest revision (canary-gate.ts); null: none. */
  readonly canary: CanaryStatus | null;
}

export function buildRolloutStatus(input: StatusInput): RolloutStatus {
  const { snapshot, policy, records, budgets, halted, tally, window, canary, alertGate } = input;
  const { states, perPool, inProgress } = tally;
  const pools: PoolStatus[] = [...budgets.values()]
    .filter((b) => b.total > 0 || b.pool.name !== policy.defaultPool.name)
    .map((b) => {
      const c = perPool.get(b.pool.name) ?? noCounts();
      return {
        name: b.pool.name,
        total: b.total,
        unavailable: c.unavailable,
        maxUnavailable: b.maxUnavailable,
        inProgress: c.upgrading,
        maxParallelUpgrades: b.pool.maxParallelUpgrades,
        done: c.done,
        failed: c.failed,
        pending: c.pending,
      };
    });
  const total = records.length;
  const done = states['upgrade-done'];
  const failed = states['upgrade-failed'];
  const pending = states['upgrade-required'];
  const paused = !policy.autoUpgrade;
  const stopped = policy.stop;
  const outsideWindow = window !== null && !window.open;
  const available = paused || halted || stopped || outsideWindow ? 0 : [...budgets.values()].reduce((sum, b) => sum + freeSlots(b), 0);
  const status: RolloutStatus = {
    observedGeneration: snapshot.rollout.generation,
    driverName: policy.driverName,
    progress: `${done}/${total}`,
    paused,
    stopped,
    halted,
    nodes: { total, done, failed, inProgress, pending, available },
    states,
    pools,
    conditions: [
      progressingCondition({ inProgress, pending, paused, halted, stopped, outsideWindow }),
      total > 0 && done === total
        ? { type: 'Complete', status: 'True', reason: 'AllNodesUpgraded', message: `${done}/${total} nodes upgrade-done` }
        : { type: 'Complete', status: 'False', reason: 'NodesRemaining', message: `${done}/${total} nodes upgrade-done` },
      paused
        ? { type: 'Paused', status: 'True', reason: 'AutoUpgradeDisabled', message: 'upgradePolicy.autoUpgrade is false: no node starts an upgrade' }
        : { type: 'Paused', status: 'False', reason: 'AutoUpgradeEnabled', message: 'upgradePolicy.autoUpgrade is true' },
      stopped
        ? { type: 'Stopped', status: 'True', reason: 'EmergencyStop', message: `upgradePolicy.stop is true: ${inProgress} started nodes frozen in their state, nothing is evicted or restarted` }
        : { type: 'Stopped', status: 'False', reason: 'Running', message: 'upgradePolicy.stop is false' },
      halted
        ? {
            type: 'Halted',
            status: 'True',
            reason: 'FailureBudgetReached',
            message: `${failed} nodes in upgrade-failed (maxFailedNodes ${policy.maxFailedNodes ?? 0}): ${failedNames(records).slice(0, 10).join(', ')}`,
          }
        : { type: 'Halted', status: 'False', reason: 'WithinFailureBudget', message: `${failed} nodes in upgrade-failed` },
      { type: 'InvalidSpec', status: 'False', reason: 'SpecValid', message: 'spec is valid' },
      ...canaryConditions(canary),
    ],
    waiting: firstWaiting(records, isKnownByName(snapshot.nodes) || isSortedByName(records)),
    nextKernelFailing: tally.nextKernelFailing.sort((a, b) => (a.node < b.node ? -1 : 1)).slice(0, MAX_WAITING_IN_STATUS),
    maintenanceWindow: windowStatus(window),
    // Absent without a canary configured; null while configured but holding nothing (a merge patch then removes the stored one).
    ...(policy.canary === null ? {} : { canary }),
  };
  return policy.alertGate === null ? status : { ...status, alertGate: alertGateStatus(policy.alertGate.url, alertGate) };
}

/** status.alertGate: open, or why it holds new starts (the hold's stable message, never the token). */
function alertGateStatus(url: string, hold: StartHold | null): AlertGateStatus {
  if (hold === null) return { state: 'open', message: `no matching alert firing at ${url}` };
  return { state: hold.reason.code === 'alert-firing' ? 'firing' : 'unreachable', message: hold.reason.message };
}

function windowStatus(window: WindowState | null): MaintenanceWindowStatus {
  if (window === null) return { open: true, closesAt: '', nextOpening: '', nextWindow: '' };
  const at = (ms: number | null): string => (ms === null ? '' : formatInstant(ms));
  return {
    open: window.open,
    closesAt: at(window.closesAt),
    nextOpening: at(window.nextOpening),
    nextWindow: window.next === null ? '' : `${window.next.window.text} (${window.next.wallTime})`,
  };
}

/**
 * While a canary holds the newest revision: whether a person approved it (CanaryApproved, its
 * message naming who) and whether it failed (CanaryFailed, naming why). Each turning True sends
 * one Event on the DriverRollout (reconcile-pass.ts).
 */
function canaryConditions(canary: CanaryStatus | null): RolloutCondition[] {
  if (canary === null) return [];
  const approved: RolloutCondition =
    canary.approvedBy === null
      ? { type: 'CanaryApproved', status: 'False', reason: 'NotApproved', message: `revision ${canary.revision} is not approved` }
      : { type: 'CanaryApproved', status: 'True', reason: 'Approved', message: `canary of revision ${canary.revision} (nodes ${canary.nodes.join(', ')}) approved by ${canary.approvedBy}` };
  const why = `canary of revision ${canary.revision} failed: ${canary.failure ?? ''}`;
  if (canary.phase !== 'CanaryFailed') return [approved, { type: 'CanaryFailed', status: 'False', reason: canary.phase, message: `canary of revision ${canary.revision}: ${canary.phase}` }];
  if (canary.rollback === null) return [approved, { type: 'CanaryFailed', status: 'True', reason: 'Halted', message: why }];
  return [approved, { type: 'CanaryFailed', status: 'True', reason: 'RollingBack', message: `${why}; rolling back ${canary.rollback}` }];
}

export interface PoolCounts {
  done: number;
  failed: number;
  pending: number;
  upgrading: number;
  unavailable: number;
}

const noCounts = (): PoolCounts => ({ done: 0, failed: 0, pending: 0, upgrading: 0, unavailable: 0 });

/**
 * What the status counts of the records, counted by the pass in a loop it runs anyway (a pass over
 * thousands of nodes reads each record as few times as it can): startTally, then tallyRecord once
 * per record after the pass has decided for it.
 */
export interface StatusTally {
  readonly states: Record<UpgradeState, number>;
  readonly perPool: ReadonlyMap<string, PoolCounts>;
  inProgress: number;
  /** Nodes whose agent labelled the next-kernel preflight failed (the keys are the agent's, OWN_KEY_DOMAIN), in the records' order. */
  readonly nextKernelFailing: { node: string; kernel: string }[];
  readonly keys: DriverKeys;
}

export function startTally(budgets: ReadonlyMap<string, PoolBudget>, policy: DriverRolloutPolicy): StatusTally {
  const perPool = new Map<string, PoolCounts>();
  for (const b of budgets.keys()) perPool.set(b, noCounts());
  const states = Object.fromEntries(UPGRADE_STATES.map((s) => [s, 0])) as Record<UpgradeState, number>;
  return { states, perPool, inProgress: 0, nextKernelFailing: [], keys: driverKeys(policy.driverName) };
}

export function tallyRecord(tally: StatusTally, { node }: NodeRecord): void {
  const state = node.view.state;
  const snapshot = node.view.snapshot;
  tally.states[state]++;
  if (isInProgress(state)) tally.inProgress++;
  const keys = tally.keys;
  if (snapshot.labels[keys.nextKernel] === NEXT_KERNEL_FAILED) tally.nextKernelFailing.push({ node: snapshot.name, kernel: snapshot.labels[keys.nextKernelFailed] ?? '' });
  if (node.pool.kind !== 'pool') return;
  const counts = tally.perPool.get(node.pool.pool.name);
  if (counts !== undefined) countInPool(counts, state, node.view.unschedulable, snapshot.ready);
}

function countInPool(counts: PoolCounts, state: UpgradeState, unschedulable: boolean, ready: boolean): void {
  if (state === 'upgrade-done') counts.done++;
  if (state === 'upgrade-failed') counts.failed++;
  if (state === 'upgrade-required') counts.pending++;
  if (isInProgress(state)) counts.upgrading++;
  if (isOutOfService({ state, unschedulable, ready })) counts.unavailable++;
}

/** The names of the nodes in upgrade-failed, sorted (only a halted status lists them). */
function failedNames(records: readonly NodeRecord[]): string[] {
  return records.filter((r) => r.node.view.state === 'upgrade-failed').map((r) => r.node.view.snapshot.name).sort();
}

/**
 * Node-specific waits first, then rollout-wide ones (no slot, paused…), each by name; at most
 * MAX_WAITING_IN_STATUS. `sortedByName`: the records are by name, as they come in the snapshot's
 * order (build-snapshot.ts, nodes-by-name.ts): then the first few of each kind are the ones the sort
 * would put first, nothing more is collected or sorted, and once that many node-specific waits
 * are found the rollout-wide ones cannot make the list, so the rest is not read.
 */
function firstWaiting(records: readonly NodeRecord[], sortedByName: boolean): RolloutStatus['waiting'] {
  const limit = sortedByName ? MAX_WAITING_IN_STATUS : Number.POSITIVE_INFINITY;
  const specific: NodeRecord[] = [];
  const wide: NodeRecord[] = [];
  for (const r of records) {
    if (r.reason === null) continue;
    const list = ROLLOUT_WIDE.has(r.reason.code) ? wide : specific;
    if (list.length < limit) list.push(r);
    if (specific.length >= limit) break;
  }
  const first = (list: NodeRecord[]): NodeRecord[] => (sortedByName || isSortedByName(list) ? list : list.sort(byName)).slice(0, MAX_WAITING_IN_STATUS);
  return [...first(specific), ...first(wide)]
    .slice(0, MAX_WAITING_IN_STATUS)
    .map((r) => ({ node: r.node.view.snapshot.name, state: r.node.view.state, reason: r.reason?.message ?? '' }));
}

const byName = (a: NodeRecord, b: NodeRecord): number => (a.node.view.snapshot.name < b.node.view.snapshot.name ? -1 : 1);

/** No record sorts before the one ahead of it (byName): a list the sort leaves as it is, as any part of it. */
function isSortedByName(records: readonly NodeRecord[]): boolean {
  for (let i = 1; i < records.length; i++) {
    const a = records[i - 1];
    const b = records[i];
    if (a !== undefined && b !== undefined && byName(b, a) < 0) return false;
  }
  return true;
}

function progressingCondition(s: { inProgress: number; pending: number; paused: boolean; halted: boolean; stopped: boolean; outsideWindow: boolean }): RolloutCondition {
  if (s.stopped && s.inProgress + s.pending > 0) return { type: 'Progressing', status: 'False', reason: 'Stopped', message: `${s.inProgress} nodes frozen, ${s.pending} waiting; stopped` };
  if (s.inProgress > 0) return { type: 'Progressing', status: 'True', reason: 'NodesUpgrading', message: `${s.inProgress} nodes upgrading, ${s.pending} waiting` };
  if (s.pending > 0 && s.paused) return { type: 'Progressing', status: 'False', reason: 'Paused', message: `${s.pending} nodes waiting; paused` };
  if (s.pending > 0 && s.halted) return { type: 'Progressing', status: 'False', reason: 'Halted', message: `${s.pending} nodes waiting; halted` };
  if (s.pending > 0 && s.outsideWindow) return { type: 'Progressing', status: 'False', reason: 'OutsideMaintenanceWindow', message: `${s.pending} nodes waiting for a maintenance window (status.maintenanceWindow.nextOpening)` };
  if (s.pending > 0) return { type: 'Progressing', status: 'True', reason: 'NodesPending', message: `${s.pending} nodes waiting to start` };
  return { type: 'Progressing', status: 'False', reason: 'Idle', message: 'no node needs an upgrade' };
}
