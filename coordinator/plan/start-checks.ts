/**
 * Whether a node in upgrade-required may start now: an ordered list of pure checks, each giving
 * a hold (a reason, and when to look again) or null (reasons are data). The first hold wins; the
 * slot check comes last so that a node held back for another reason never takes a slot.
 *
 * The documented order of holds (coordinator/README.md, plan/README.md): stopped (before any
 * check: plan-upgrades.ts) > paused > halted > canary > outside maintenance window > alert firing
 * / alert gate unreachable > pacing > NotReady > no slot.
 */
import type { PoolBudget } from './pool-capacity.ts';
import { isOutOfService, slotShortage } from './pool-capacity.ts';
import type { NodeContext, Reason, StepContext } from './step.ts';

export interface StartContext extends StepContext {
  readonly halted: boolean;
  readonly failedNodes: number;
  readonly budgets: ReadonlyMap<string, PoolBudget>;
  /** The alert gate's hold for this pass (alert-gate.ts), the same for every node; null: open or none. */
  readonly alertGate: StartHold | null;
}

/** Why a node may not start now, and when to look again (epoch ms; null: only a change in the cluster can lift it). */
export interface StartHold {
  readonly reason: Reason;
  readonly wakeAt: number | null;
}

export type StartCheck = (node: NodeContext, ctx: StartContext) => StartHold | null;

/** A hold that only a change (of the spec, the cluster or a reading) can lift. */
export const untilChanged = (reason: Reason): StartHold => ({ reason, wakeAt: null });

const same = (code: Reason['code'], text: string): StartHold => untilChanged({ code, message: text, detail: text });

export const isPaused: StartCheck = (_node, ctx) =>
  ctx.policy.autoUpgrade ? null : same('paused', 'paused: upgradePolicy.autoUpgrade is false');

export const isSkipped: StartCheck = (node, ctx) =>
  node.view.labels[ctx.policy.keys.upgradeSkip] === 'true' ? same('skipped', `skipped: label ${ctx.policy.keys.upgradeSkip}=true`) : null;

export const isInTwoPools: StartCheck = (node) =>
  node.pool.kind === 'conflict' ? same('pool-conflict', `left alone: node matches more than one pool (${node.pool.pools.join(', ')})`) : null;

export const hasNoDriverPod: StartCheck = (node) => (node.driver.pods.length === 0 ? same('no-driver-pod', 'no driver pod on the node') : null);

/** The failure budget stops new starts; a failed node being retried is already counted and may start. */
export const isHalted: StartCheck = (node, ctx) =>
  ctx.halted && node.view.annotations[ctx.policy.keys.failedRevision] === undefined
    ? untilChanged({
        code: 'halted',
        message: `halted: failure budget reached (maxFailedNodes ${ctx.policy.maxFailedNodes ?? 0})`,
        detail: `halted: ${ctx.failedNodes} nodes failed or retrying after a failure (maxFailedNodes ${ctx.policy.maxFailedNodes ?? 0})`,
      })
    : null;

/** A matching alert fires, or Prometheus cannot be asked (fails closed): the pass's verdict, alert-gate.ts. */
export const isAlertGated: StartCheck = (_node, ctx) => ctx.alertGate;

export const hasNoSlot: StartCheck = (node, ctx) => {
  if (node.pool.kind !== 'pool') return null;
  const budget = ctx.budgets.get(node.pool.pool.name);
  if (budget === undefined) return null;
  const shortage = slotShortage(budget, isOutOfService({ state: node.view.state, unschedulable: node.view.unschedulable, ready: node.view.snapshot.ready }));
  if (shortage === null) return null;
  // Thousands of nodes may wait on one pool: share one hold while the shortage is the same.
  const cached = noSlotHolds.get(budget);
  if (cached?.reason.detail === shortage) return cached;
  const pool = budget.pool;
  const maxUnavailable = pool.maxUnavailable.kind === 'count' ? String(pool.maxUnavailable.value) : `${pool.maxUnavailable.value}%`;
  const hold = untilChanged({
    code: 'no-slot',
    message: `waiting for a slot in pool ${pool.name} (maxUnavailable ${maxUnavailable}, maxParallelUpgrades ${pool.maxParallelUpgrades})`,
    detail: shortage,
  });
  noSlotHolds.set(budget, hold);
  return hold;
};

const noSlotHolds = new WeakMap<PoolBudget, StartHold>();

export const START_CHECKS: readonly StartCheck[] = [isPaused, isSkipped, isInTwoPools, hasNoDriverPod, isHalted, isAlertGated, hasNoSlot];

export function firstHold(checks: readonly StartCheck[], node: NodeContext, ctx: StartContext): StartHold | null {
  for (const check of checks) {
    const hold = check(node, ctx);
    if (hold !== null) return hold;
  }
  return null;
}
