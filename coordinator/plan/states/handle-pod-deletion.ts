import type { DriverRolloutPolicy } from '../../policy/driver-rollout-spec.ts';
import { isNeverRemoved, listPods, usesDevice } from '../device-pods.ts';
import { dueEvictions, evictionBlocks } from '../evictions.ts';
import type { PodSnapshot } from '../snapshot.ts';
import { advance, fail, readTimer, skip, timeoutText, wait, type NodeContext, type Reason, type StateHandler, type StepContext, type StepResult } from '../step.ts';

/**
 * Evict the pods that use the device, through the Eviction API (PodDisruptionBudgets hold, as
 * with upstream's drain helper). All gone → pod-restart-required (drain is skipped). Pods that
 * may not be evicted (no controller without `force`, emptyDir without `deleteEmptyDir`), or a
 * pod still there at the timeout (e.g. its eviction refused by a PDB, named in the reason) →
 * drain-required if drain is enabled, else upgrade-failed. podDeletion.enable false →
 * drain-required. Refused evictions are retried every EVICTION_RETRY_MS.
 */
export const handlePodDeletion: StateHandler = (node, ctx) => {
  const settings = ctx.policy.podDeletion;
  if (settings === null) return skip('drain-required', 'podDeletion off');
  const devicePods = node.view.snapshot.pods.filter((p) => !isNeverRemoved(p) && usesDevice(p, ctx.policy.devicePods));
  if (devicePods.length === 0) return skip('pod-restart-required', 'no device pods to delete');
  const refused = devicePods.filter((p) => !p.deleting).map((p) => [p, deletionRefusal(p, settings)] as const);
  const blocked = refused.filter(([, why]) => why !== null);
  if (blocked.length > 0) {
    return fallBack(node, ctx, `cannot delete device pods: ${blocked.map(([p, why]) => `${p.namespace}/${p.name} (${why ?? ''})`).join(', ')}`);
  }
  const timer = readTimer(node, ctx, ctx.policy.keys.podDeletionStartTime, settings.timeoutSeconds);
  const blocks = evictionBlocks(devicePods, ctx);
  if (timer.expired) {
    const why = blocks.length > 0 ? blocks.join('; ') : `still present: ${listPods(devicePods)}`;
    return fallBack(node, ctx, `device pods not removed after ${settings.timeoutSeconds}s: ${why}`);
  }
  const due = dueEvictions(node.view.snapshot.name, devicePods, ctx, timer.deadline);
  const reason = blocks.length > 0
    ? { code: 'eviction-blocked' as const, message: `evicting device pods: ${blocks.join('; ')}`, detail: `evicting device pods: ${blocks.join('; ')} ${timer.progress}` }
    : waitingForDeletion(listPods(devicePods), settings.timeoutSeconds, timer.progress);
  return wait(reason, [...timer.actions, ...due.actions], due.wakeAt);
};

function waitingForDeletion(listed: string, timeoutSeconds: number, progress: string): Reason {
  return {
    code: 'waiting-for-pod-deletion',
    message: `waiting for device pods to terminate: ${listed} (${timeoutText(timeoutSeconds)})`,
    detail: `waiting for device pods to terminate: ${listed} ${progress}`,
  };
}

function deletionRefusal(pod: PodSnapshot, settings: NonNullable<DriverRolloutPolicy['podDeletion']>): string | null {
  if (pod.controllerKind === null && !settings.force) return 'not managed by a controller; set podDeletion.force';
  if (pod.usesEmptyDir && !settings.deleteEmptyDir) return 'uses emptyDir; set podDeletion.deleteEmptyDir';
  return null;
}

function fallBack(node: NodeContext, ctx: StepContext, why: string): StepResult {
  if (ctx.policy.drain.enable) return advance('drain-required', true, [], `${why}; draining the node instead`);
  return fail(node, ctx, `${why}; drain is not enabled`);
}
