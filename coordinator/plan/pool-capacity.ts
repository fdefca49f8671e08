/**
 * Slots per pool. A node may start its upgrade when
 * - maxParallelUpgrades is 0 or fewer than that many pool nodes are upgrading, and
 * - it is already out of service (cordoned: starting it takes nothing more away; a NotReady node
 *   does not start at all, start-checks.ts), or
 *   fewer than maxUnavailable pool nodes are out of service.
 *
 * Out of service = cordoned, NotReady, or upgrading (cordon-required … validation-required).
 * uncordon-required does not hold a slot by itself: what is left is to uncordon, which only gives
 * capacity back (while still cordoned it counts through the cordon). This lets a node leave
 * upgrade-failed through uncordon-required without taking a slot. upgrade-failed nodes are not
 * "upgrading" either (they do not hold a parallel slot,
 * unlike upstream where they block every other upgrade forever) but they stay cordoned, so they
 * count against maxUnavailable of their own pool, and only of their pool, while cordoned.
 *
 * The counts are taken from the snapshot and only ever grow as nodes start, so executing any
 * part of a plan stays within limits. A slot freed during a pass is handed out in the same pass
 * only behind the plan that frees it (slot-release.ts, NodePlan.after).
 */
import type { UpgradeState } from '../../shared/keys.ts';
import type { IntOrPercent, PoolPolicy } from '../policy/driver-rollout-spec.ts';

/** States that hold a slot (maxParallelUpgrades) and make a node out of service. */
export const UPGRADING_STATES: ReadonlySet<UpgradeState> = new Set<UpgradeState>([
  'cordon-required',
  'wait-for-jobs-required',
  'pod-deletion-required',
  'drain-required',
  'pod-restart-required',
  'validation-required',
]);

export function isUpgrading(state: UpgradeState): boolean {
  return UPGRADING_STATES.has(state);
}

/** States counted as "upgrade in progress" in status and metrics: cordon-required … uncordon-required. */
export function isInProgress(state: UpgradeState): boolean {
  return UPGRADING_STATES.has(state) || state === 'uncordon-required';
}

/** Whether a state change starts the node's upgrade: out of upgrade-required into cordon-required … uncordon-required. */
export function isStartOfUpgrade(from: UpgradeState, to: UpgradeState): boolean {
  return from === 'upgrade-required' && isInProgress(to);
}

/** What a node counts against its pool's limits: as the snapshot has it, or as a pass leaves it. */
export interface Membership {
  readonly state: UpgradeState;
  readonly unschedulable: boolean;
  readonly ready: boolean;
}

export function isOutOfService(node: Membership): boolean {
  return node.unschedulable || !node.ready || isUpgrading(node.state);
}

/** Percent of `total`, rounded up (GPU Operator semantics). */
export function resolveMaxUnavailable(value: IntOrPercent, total: number): number {
  return value.kind === 'count' ? value.value : Math.ceil((value.value * total) / 100);
}

export interface PoolBudget {
  readonly pool: PoolPolicy;
  total: number;
  unavailable: number;
  upgrading: number;
  /** Members whose Ready condition is not True (pool-disruption.ts). */
  notReady: number;
  /** Resolved once every member is counted (`sealBudget`). */
  maxUnavailable: number;
}

export function createBudget(pool: PoolPolicy): PoolBudget {
  return { pool, total: 0, unavailable: 0, upgrading: 0, notReady: 0, maxUnavailable: 0 };
}

export function countMember(budget: PoolBudget, node: Membership): void {
  budget.total++;
  if (isOutOfService(node)) budget.unavailable++;
  if (isUpgrading(node.state)) budget.upgrading++;
  if (!node.ready) budget.notReady++;
}

export function sealBudget(budget: PoolBudget): void {
  budget.maxUnavailable = resolveMaxUnavailable(budget.pool.maxUnavailable, budget.total);
}

/** Why the node cannot start now, or null when a slot is free. */
export function slotShortage(budget: PoolBudget, nodeOutOfService: boolean): string | null {
  const parallel = budget.pool.maxParallelUpgrades;
  if (parallel > 0 && budget.upgrading >= parallel) {
    return `no slot: ${budget.upgrading}/${parallel} upgrading in pool ${budget.pool.name}`;
  }
  if (!nodeOutOfService && budget.unavailable >= budget.maxUnavailable) {
    return `no slot: ${budget.unavailable}/${budget.maxUnavailable} unavailable in pool ${budget.pool.name}`;
  }
  return null;
}

export function takeSlot(budget: PoolBudget, nodeOutOfService: boolean): void {
  budget.upgrading++;
  if (!nodeOutOfService) budget.unavailable++;
}

/** How many more nodes could start now (nodes already out of service aside). */
export function freeSlots(budget: PoolBudget): number {
  const byUnavailable = Math.max(0, budget.maxUnavailable - budget.unavailable);
  const parallel = budget.pool.maxParallelUpgrades;
  return parallel === 0 ? byUnavailable : Math.min(byUnavailable, Math.max(0, parallel - budget.upgrading));
}
