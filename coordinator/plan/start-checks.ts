/**
 * Whether a node in upgrade-required may start now: an ordered list of pure checks, each giving
 * a reason or null (reasons are data). The first reason wins; the slot check comes last so that a
 * node held back for another reason never takes a slot.
 */
import type { PoolBudget } from './pool-capacity.ts';
import { isOutOfService, slotShortage } from './pool-capacity.ts';
import type { NodeContext, Reason, StepContext } from './step.ts';

export interface StartContext extends StepContext {
  readonly halted: boolean;
  readonly failedNodes: number;
  readonly budgets: ReadonlyMap<string, PoolBudget>;
}

export type StartCheck = (node: NodeContext, ctx: StartContext) => Reason | null;

const same = (code: Reason['code'], text: string): Reason => ({ code, message: text, detail: text });

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
    ? {
        code: 'halted',
        message: `halted: failure budget reached (maxFailedNodes ${ctx.policy.maxFailedNodes ?? 0})`,
        detail: `halted: ${ctx.failedNodes} nodes failed or retrying after a failure (maxFailedNodes ${ctx.policy.maxFailedNodes ?? 0})`,
      }
    : null;

export const hasNoSlot: StartCheck = (node, ctx) => {
  if (node.pool.kind !== 'pool') return null;
  const budget = ctx.budgets.get(node.pool.pool.name);
  if (budget === undefined) return null;
  const shortage = slotShortage(budget, isOutOfService({ state: node.view.state, unschedulable: node.view.unschedulable, ready: node.view.snapshot.ready }));
  if (shortage === null) return null;
  // Thousands of nodes may wait on one pool: share one Reason while the shortage is the same.
  const cached = noSlotReasons.get(budget);
  if (cached?.detail === shortage) return cached;
  const pool = budget.pool;
  const maxUnavailable = pool.maxUnavailable.kind === 'count' ? String(pool.maxUnavailable.value) : `${pool.maxUnavailable.value}%`;
  const reason: Reason = {
    code: 'no-slot',
    message: `waiting for a slot in pool ${pool.name} (maxUnavailable ${maxUnavailable}, maxParallelUpgrades ${pool.maxParallelUpgrades})`,
    detail: shortage,
  };
  noSlotReasons.set(budget, reason);
  return reason;
};

const noSlotReasons = new WeakMap<PoolBudget, Reason>();

export const START_CHECKS: readonly StartCheck[] = [isPaused, isSkipped, isInTwoPools, hasNoDriverPod, isHalted, hasNoSlot];

/**
 * For a node whose driver a dependency's maintenance stopped (load-order.ts,
 * stoppedForDependencies): it is down already, and its own flow is what lets it load again, so
 * only what leaves the node alone holds it; the gates that hold new starts (pause, failure
 * budget, slots) do not.
 */
export const RESUME_CHECKS: readonly StartCheck[] = [isSkipped, isInTwoPools, hasNoDriverPod];

export function firstReason(checks: readonly StartCheck[], node: NodeContext, ctx: StartContext): Reason | null {
  for (const check of checks) {
    const reason = check(node, ctx);
    if (reason !== null) return reason;
  }
  return null;
}
