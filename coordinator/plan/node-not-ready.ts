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
 * lastTransitionTime it waits without that bound.
 *
 * The steps before go on: cordon, the job wait, pod deletion and drain act through the API and
 * are what an admin wants for a node whose workloads cannot be reached (their controllers replace
 * evicted pods elsewhere; an eviction the kubelet never confirms ends in that step's own timeout).
 * A NotReady node counts as unavailable for the pool limits in any state (pool-capacity.ts), as
 * upstream counts it. Upstream has no such hold: it moves a NotReady node on whatever its pods'
 * stale statuses say.
 */
import type { UpgradeState } from '../../shared/keys.ts';
import type { NodeNotReadySnapshot } from './snapshot.ts';
import { fail, wait, type NodeContext, type StepContext, type StepResult } from './step.ts';

/** The states in which a NotReady node neither acts nor moves on: from the driver restart to upgrade-done. */
export const HELD_WHILE_NOT_READY: ReadonlySet<UpgradeState> = new Set<UpgradeState>(['pod-restart-required', 'validation-required', 'uncordon-required']);

/** The wait (or the failure) of a NotReady node in a held state; null when the node is Ready or its state is not held. */
export function holdWhileNotReady(node: NodeContext, ctx: StepContext): StepResult | null {
  const snapshot = node.view.snapshot;
  const state = node.view.state;
  if (snapshot.ready || !HELD_WHILE_NOT_READY.has(state)) return null;
  const limit = notReadyLimitSeconds(ctx);
  const condition = describeNotReady(snapshot.notReady ?? null);
  const since = snapshot.notReady?.since ?? null;
  const elapsed = since === null ? null : Math.max(0, Math.floor((ctx.now - since) / 1000));
  const deadline = since === null || limit === 0 ? null : since + limit * 1000;
  if (deadline !== null && ctx.now >= deadline) {
    return fail(node, ctx, `node NotReady for ${String(elapsed)}s (limit ${limit}s) in ${state}: ${condition}; its kubelet cannot show the driver Ready`);
  }
  const bound = limit === 0
    ? 'no time limit: podRestart.failAfterSeconds and timeoutSeconds are 0'
    : since === null ? 'no time limit: the condition has no lastTransitionTime' : `fails the node after ${limit}s NotReady`;
  const message = `node NotReady (${condition}): held in ${state} until it is Ready again (${bound})`;
  const progress = elapsed === null ? '' : limit === 0 ? ` (${elapsed}s NotReady)` : ` (${elapsed}s of ${limit}s NotReady)`;
  return wait({ code: 'node-not-ready', message, detail: `node NotReady (${condition}): held in ${state}${progress}` }, [], deadline);
}

/** How long a node may stay NotReady in a held state before it fails; 0 = forever. */
export function notReadyLimitSeconds(ctx: StepContext): number {
  const { failAfterSeconds, timeoutSeconds } = ctx.policy.podRestart;
  return failAfterSeconds > 0 ? failAfterSeconds : timeoutSeconds;
}

/** "Ready Unknown: NodeStatusUnknown: Kubelet stopped posting node status." */
function describeNotReady(notReady: NodeNotReadySnapshot | null): string {
  if (notReady === null) return 'Ready not True';
  return [`Ready ${notReady.status}`, notReady.reason, notReady.message].filter((part) => part !== '').join(': ');
}
