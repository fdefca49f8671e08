/**
 * Whether a node in upgrade-required may start now: an ordered list of pure checks, each giving a
 * hold (a reason, and when to look again) or null (reasons are data). The first hold wins; the
 * slot check comes last so that a node held back for another reason never takes a slot.
 *
 * The order (coordinator/README.md, "Why a node does not start"): stopped (before any check: the
 * node does not run at all) > paused > the node's own exclusions (skip label, two pools, no driver
 * pod, its kernel would refuse the new driver's modules) > halted > canary > outside maintenance
 * window > alert > pacing > NotReady (a disrupted pool, then the node itself) > no slot. A node
 * whose driver a dependency's maintenance stopped meets only RESUME_CHECKS, in the same order.
 *
 * A check that holds for time says when the hold ends (`wakeAt`, epoch ms): the planner folds it
 * into the plan's next wake time, so a quiet cluster is planned again when a window opens or a
 * delay ends. A hold that only a change in the cluster can lift has `wakeAt: null`.
 */
import { isOutsideWindow, type WindowState } from './maintenance-windows.ts';
import { isPaced, type PoolPacing } from './pacing.ts';
import type { PoolBudget } from './pool-capacity.ts';
import { isOutOfService, slotShortage } from './pool-capacity.ts';
import type { CanaryGate } from './canary-gate.ts';
import { describeNotReady } from './node-not-ready.ts';
import { describeDisruption } from './pool-disruption.ts';
import { isRefusedBySignatures } from './signature-refusal.ts';
import type { NodeContext, Reason, StepContext } from './step.ts';

export interface StartContext extends StepContext {
  readonly halted: boolean;
  readonly failedNodes: number;
  readonly budgets: ReadonlyMap<string, PoolBudget>;
  /** Pool name → its pacing, counted from the nodes (pacing.ts). */
  readonly pacing: ReadonlyMap<string, PoolPacing>;
  /** The maintenance windows at `now`; null: none configured (always open). */
  readonly window: WindowState | null;
  /** The canary of the newest revision (canary-gate.ts); its hold applies to the nodes outside it. */
  readonly canary: CanaryGate;
  /** The alert gate's hold for this pass (alert-gate.ts), the same for every node; null: open or none. */
  readonly alertGate: StartHold | null;
}

/** Why a node may not start now, and when to look again (epoch ms; null: only a change in the cluster can lift it). */
export interface StartHold {
  readonly reason: Reason;
  readonly wakeAt: number | null;
}

export type StartCheck = (node: NodeContext, ctx: StartContext) => StartHold | null;

const same = (code: Reason['code'], text: string): StartHold => untimed({ code, message: text, detail: text });

/** A hold only a change in the cluster can lift. */
export const untimed = (reason: Reason): StartHold => ({ reason, wakeAt: null });

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
    ? untimed({
        code: 'halted',
        message: `halted: failure budget reached (maxFailedNodes ${ctx.policy.maxFailedNodes ?? 0})`,
        detail: `halted: ${ctx.failedNodes} nodes failed or retrying after a failure (maxFailedNodes ${ctx.policy.maxFailedNodes ?? 0})`,
      })
    : null;

/** The canary of the newest revision holds every node outside it until it is approved or has soaked, and for good once it failed. */
export const isHeldByCanary: StartCheck = (node, ctx) => ctx.canary.holdFor(node.view.snapshot.name);

/**
 * A pool with too many nodes NotReady at once (pool-disruption.ts) starts no node, Ready or not:
 * what took its nodes away may take more, and a node started now would be cordoned into it.
 */
export const isPoolDisrupted: StartCheck = (node, ctx) => {
  if (node.pool.kind !== 'pool') return null;
  const disruption = ctx.disruptions.get(node.pool.pool.name);
  if (disruption === undefined) return null;
  const cached = disruptedHolds.get(disruption);
  if (cached !== undefined) return cached;
  const hold = same('pool-not-ready', `not started: ${describeDisruption(disruption)}; starts resume once the pool is healthy again`);
  disruptedHolds.set(disruption, hold);
  return hold;
};

const disruptedHolds = new WeakMap<object, StartHold>();

/**
 * A NotReady node does not start: its kubelet cannot show what runs on it, nor confirm a pod gone
 * or a driver loaded, and it would start without taking a slot (it is out of service already).
 */
export const isNotReady: StartCheck = (node) => {
  const snapshot = node.view.snapshot;
  if (snapshot.ready) return null;
  return same('node-not-ready', `not started: node NotReady (${describeNotReady(snapshot.notReady ?? null)}); starts once it is Ready again`);
};

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
  const hold: StartHold = {
    reason: {
      code: 'no-slot',
      message: `waiting for a slot in pool ${pool.name} (maxUnavailable ${maxUnavailable}, maxParallelUpgrades ${pool.maxParallelUpgrades})`,
      detail: shortage,
    },
    wakeAt: null,
  };
  noSlotHolds.set(budget, hold);
  return hold;
};

const noSlotHolds = new WeakMap<PoolBudget, StartHold>();

/** In the documented order of holds (coordinator/README.md): the first wins. */
export const START_CHECKS: readonly StartCheck[] = [isPaused, isSkipped, isInTwoPools, hasNoDriverPod, isRefusedBySignatures, isHalted, isHeldByCanary, isOutsideWindow, isAlertGated, isPaced, isPoolDisrupted, isNotReady, hasNoSlot];

/**
 * For a node whose driver a dependency's maintenance stopped (load-order.ts,
 * stoppedForDependency): its driver is down already, and only its own flow lets its new pod load
 * again, so a gate that holds new starts would only keep the node out of service longer. What
 * leaves the node alone holds it (skip label, two pools, no driver pod yet, a kernel that would
 * refuse the new modules: the agent would refuse them too), and so does the node
 * being NotReady: its kubelet cannot show the new pod, and a start would only run the NotReady
 * clock of the driver restart; the hold ends by itself once it is Ready. Pause, failure budget,
 * canary, maintenance window, alert gate, pacing, a disrupted pool (the node is Ready: its start
 * takes no more of the pool, the dependency's maintenance took it) and slots do not hold it.
 */
export const RESUME_CHECKS: readonly StartCheck[] = [isSkipped, isInTwoPools, hasNoDriverPod, isRefusedBySignatures, isNotReady];

export function firstHold(checks: readonly StartCheck[], node: NodeContext, ctx: StartContext): StartHold | null {
  for (const check of checks) {
    const hold = check(node, ctx);
    if (hold !== null) return hold;
  }
  return null;
}
