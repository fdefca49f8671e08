import type { PodSnapshot } from '../snapshot.ts';
import { matchesSelector } from '../../policy/label-selector.ts';
import { isNeverRemoved, isTerminal, listPods } from '../device-pods.ts';
import { dueEvictions, evictionBlocks } from '../evictions.ts';
import { fail, readTimer, skip, timeoutText, wait, type Reason, type StateHandler } from '../step.ts';

/**
 * Drain through the Eviction API, so PodDisruptionBudgets hold. Never DaemonSet pods, mirror
 * pods or pods labelled drain-skip=true; only pods matching drain.podSelector. As `kubectl drain`,
 * nothing is evicted while a pod that may not be (no controller without `force`, emptyDir without
 * `deleteEmptyDir`) is on the node. Refused evictions are retried every EVICTION_RETRY_MS until
 * the drain timeout (started at the first pass in drain-required, kept in an annotation so a
 * restart resumes it), then upgrade-failed. drain.enable false → straight to pod-restart-required.
 */
export const handleDrain: StateHandler = (node, ctx) => {
  const settings = ctx.policy.drain;
  if (!settings.enable) return skip('pod-restart-required', 'drain off');
  const skipKey = ctx.policy.keys.drainSkip;
  const pods: PodSnapshot[] = [];
  for (const p of node.view.snapshot.pods) {
    if (!isTerminal(p) && !isNeverRemoved(p) && p.labels[skipKey] !== 'true' && matchesSelector(settings.podSelector, p.labels)) pods.push(p);
  }
  if (pods.length === 0) return skip('pod-restart-required', 'no pods to drain');
  const timer = readTimer(node, ctx, ctx.policy.keys.drainStartTime, settings.timeoutSeconds);
  const refusals: string[] = [];
  for (const p of pods) {
    if (p.deleting) continue;
    if (p.controllerKind === null && !settings.force) refusals.push(`${p.namespace}/${p.name} is not managed by a controller (set drain.force)`);
    else if (p.usesEmptyDir && !settings.deleteEmptyDir) refusals.push(`${p.namespace}/${p.name} uses emptyDir (set drain.deleteEmptyDir)`);
  }
  const blocks = evictionBlocks(pods, ctx);
  const reason = drainReason(refusals, blocks, pods, settings.timeoutSeconds, timer.progress);
  if (timer.expired) return fail(node, ctx, `drain timed out after ${settings.timeoutSeconds}s: ${reason.detail}`);
  if (refusals.length > 0) return wait(reason, timer.actions, timer.deadline);
  const due = dueEvictions(node.view.snapshot.name, pods, ctx, timer.deadline);
  return wait(reason, [...timer.actions, ...due.actions], due.wakeAt);
};

function drainReason(refusals: readonly string[], blocks: readonly string[], pods: readonly PodSnapshot[], timeoutSeconds: number, progress: string): Reason {
  if (refusals.length > 0) {
    const message = `drain blocked: ${refusals.join('; ')}`;
    return { code: 'drain-blocked', message, detail: `${message} ${progress}` };
  }
  if (blocks.length > 0) {
    const message = blocks.join('; ');
    return { code: 'eviction-blocked', message, detail: `${message} ${progress}` };
  }
  const listed = listPods(pods);
  return {
    code: 'waiting-for-eviction',
    message: `draining: waiting for ${listed} to leave (${timeoutText(timeoutSeconds)})`,
    detail: `draining: waiting for ${listed} to leave ${progress}`,
  };
}
