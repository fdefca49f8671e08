/**
 * A node whose Ready condition is not True mid-upgrade.
 *
 * Its kubelet is not reporting (Unknown: the node controller's word for a kubelet that stopped
 * posting status) or says the node is unhealthy (False). Either way nothing the API shows about
 * the node's pods is current: a driver pod's or a validator's Ready condition is what the kubelet
 * last wrote, a driver pod deleted there is never confirmed gone, a new one is never started. So
 * the node cannot prove its driver, and from the driver restart on (HELD_WHILE_NOT_READY) it does
 * not move: no driver pod deleted, no safe load released, no validation judged, no uncordon, no
 * upgrade-done. It waits, naming the condition, and goes on by itself once Ready again. If it stays
 * NotReady longer than `podRestart.failAfterSeconds` (`podRestart.timeoutSeconds` when that is 0;
 * forever when both are), counted from the condition's lastTransitionTime (a fact of the cluster,
 * so a restarted coordinator counts on), the node fails with a reason naming NotReady. Without a
 * lastTransitionTime it waits without that bound. While its pool is disrupted (too many nodes
 * NotReady at once, pool-disruption.ts) its NotReady time fails nothing: the node is marked
 * (notReadyFrozen) and, once the pool is healthy again, its NotReady time counts from then
 * (notReadyCountedFrom), so a blip that took a rack away fails none of it.
 *
 * The steps before go on: cordon, the job wait, pod deletion and drain act through the API and
 * are what an admin wants for a node whose workloads cannot be reached (their controllers replace
 * evicted pods elsewhere; an eviction the kubelet never confirms ends in that step's own timeout).
 * A NotReady node counts as unavailable for the pool limits in any state (pool-capacity.ts), as
 * upstream counts it. Upstream has no such hold: it moves a NotReady node on whatever its pods'
 * stale statuses say.
 */
import type { UpgradeState } from '../../shared/keys.ts';
import type { NodeAction } from './action.ts';
import { readUnixSeconds, toUnixSeconds } from './node-view.ts';
import { describeDisruption } from './pool-disruption.ts';
import type { NodeNotReadySnapshot } from './snapshot.ts';
import { fail, wait, type NodeContext, type StepContext, type StepResult } from './step.ts';

/** The states in which a NotReady node neither acts nor moves on: from the driver restart to upgrade-done. */
export const HELD_WHILE_NOT_READY: ReadonlySet<UpgradeState> = new Set<UpgradeState>(['pod-restart-required', 'validation-required', 'uncordon-required']);

/** The wait (or the failure) of a NotReady node in a held state; null when the node is Ready or its state is not held. */
export function holdWhileNotReady(node: NodeContext, ctx: StepContext): StepResult | null {
  const snapshot = node.view.snapshot;
  const state = node.view.state;
  if (snapshot.ready || !HELD_WHILE_NOT_READY.has(state)) return null;
  const condition = describeNotReady(snapshot.notReady ?? null);
  const since = snapshot.notReady?.since ?? null;
  const disruption = node.pool.kind === 'pool' ? ctx.disruptions.get(node.pool.pool.name) : undefined;
  if (disruption !== undefined) return frozen(node, ctx, condition, describeDisruption(disruption));
  const clock = notReadyClock(node, ctx, since);
  const limit = notReadyLimitSeconds(ctx);
  const start = clock.start;
  const elapsed = start === null ? null : Math.max(0, Math.floor((ctx.now - start) / 1000));
  const deadline = start === null || limit === 0 ? null : start + limit * 1000;
  if (deadline !== null && ctx.now >= deadline) {
    return fail(node, ctx, `node NotReady for ${String(elapsed)}s (limit ${limit}s) in ${state}: ${condition}; its kubelet cannot show the driver Ready`, clock.actions);
  }
  const bound = limit === 0
    ? 'no time limit: podRestart.failAfterSeconds and timeoutSeconds are 0'
    : start === null ? 'no time limit: the condition has no lastTransitionTime' : `fails the node after ${limit}s NotReady`;
  const message = `node NotReady (${condition}): held in ${state} until it is Ready again (${bound})`;
  const progress = elapsed === null ? '' : limit === 0 ? ` (${elapsed}s NotReady)` : ` (${elapsed}s of ${limit}s NotReady)`;
  return wait({ code: 'node-not-ready', message, detail: `node NotReady (${condition}): held in ${state}${progress}` }, clock.actions, deadline);
}

/** In a disrupted pool: held, its NotReady time failing nothing (marked once, so the clock restarts when the pool is healthy). */
function frozen(node: NodeContext, ctx: StepContext, condition: string, disruption: string): StepResult {
  const keys = ctx.policy.keys;
  const name = node.view.snapshot.name;
  const mark: NodeAction[] = node.view.annotations[keys.notReadyFrozen] === undefined ? [{ kind: 'setAnnotation', node: name, key: keys.notReadyFrozen, value: toUnixSeconds(ctx.now) }] : [];
  const message = `node NotReady (${condition}): held in ${node.view.state} until it is Ready again; ${disruption}: its NotReady time fails nothing until the pool is healthy`;
  return wait({ code: 'node-not-ready', message, detail: message }, mark, null);
}

/**
 * Where the node's NotReady time starts: the condition's lastTransitionTime, or later when its
 * pool was disrupted during this NotReady spell (notReadyFrozen at or after it): then from the
 * first pass that finds the pool healthy again, recorded in notReadyCountedFrom.
 */
function notReadyClock(node: NodeContext, ctx: StepContext, since: number | null): { readonly start: number | null; readonly actions: readonly NodeAction[] } {
  if (since === null) return { start: null, actions: [] };
  const keys = ctx.policy.keys;
  const name = node.view.snapshot.name;
  const a = node.view.annotations;
  const frozenAt = readUnixSeconds(a, keys.notReadyFrozen);
  if (frozenAt !== null && frozenAt >= since) {
    return {
      start: ctx.now,
      actions: [
        { kind: 'setAnnotation', node: name, key: keys.notReadyCountedFrom, value: toUnixSeconds(ctx.now) },
        { kind: 'removeAnnotation', node: name, key: keys.notReadyFrozen },
      ],
    };
  }
  const countedFrom = readUnixSeconds(a, keys.notReadyCountedFrom);
  return { start: countedFrom !== null && countedFrom > since ? countedFrom : since, actions: [] };
}

/** How long a node may stay NotReady in a held state before it fails; 0 = forever. */
export function notReadyLimitSeconds(ctx: StepContext): number {
  const { failAfterSeconds, timeoutSeconds } = ctx.policy.podRestart;
  return failAfterSeconds > 0 ? failAfterSeconds : timeoutSeconds;
}

/** "Ready Unknown: NodeStatusUnknown: Kubelet stopped posting node status." */
export function describeNotReady(notReady: NodeNotReadySnapshot | null): string {
  if (notReady === null) return 'Ready not True';
  return [`Ready ${notReady.status}`, notReady.reason, notReady.message].filter((part) => part !== '').join(': ');
}
