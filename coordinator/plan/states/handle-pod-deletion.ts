import type { DriverRolloutPolicy } from '../../policy/driver-rollout-spec.ts';
import type { NodeAction } from '../action.ts';
import { isNeverRemoved, listPods, usesDevice } from '../device-pods.ts';
import type { PodSnapshot } from '../snapshot.ts';
import { advance, fail, readTimer, timeoutText, wait, type NodeContext, type StateHandler, type StepContext, type StepResult } from '../step.ts';

/**
 * Delete the pods that use the device. All gone → pod-restart-required (drain is skipped). Pods
 * that may not be deleted (no controller without `force`, emptyDir without `deleteEmptyDir`) or a
 * timeout → drain-required if drain is enabled, else upgrade-failed. No podDeletion configured →
 * drain-required.
 */
export const handlePodDeletion: StateHandler = (node, ctx) => {
  const settings = ctx.policy.podDeletion;
  if (settings === null) return advance('drain-required', true);
  const devicePods = node.view.snapshot.pods.filter((p) => !isNeverRemoved(p) && usesDevice(p, ctx.policy.devicePods));
  if (devicePods.length === 0) return advance('pod-restart-required', true);
  const refused = devicePods.filter((p) => !p.deleting).map((p) => [p, deletionRefusal(p, settings)] as const);
  const blocked = refused.filter(([, why]) => why !== null);
  if (blocked.length > 0) {
    return fallBack(node, ctx, `cannot delete device pods: ${blocked.map(([p, why]) => `${p.namespace}/${p.name} (${why ?? ''})`).join(', ')}`);
  }
  const timer = readTimer(node, ctx, ctx.policy.keys.podDeletionStartTime, settings.timeoutSeconds);
  if (timer.expired) {
    return fallBack(node, ctx, `device pods still present after ${settings.timeoutSeconds}s: ${listPods(devicePods)}`);
  }
  const deletes: NodeAction[] = refused.map(([p]) => ({
    kind: 'deletePod',
    node: node.view.snapshot.name,
    pod: { namespace: p.namespace, name: p.name, uid: p.uid },
  }));
  return wait(
    {
      code: 'waiting-for-pod-deletion',
      message: `waiting for device pods to terminate: ${listPods(devicePods)} (${timeoutText(settings.timeoutSeconds)})`,
      detail: `waiting for device pods to terminate: ${listPods(devicePods)} ${timer.progress}`,
    },
    [...timer.actions, ...deletes],
    timer.deadline,
  );
};

function deletionRefusal(pod: PodSnapshot, settings: NonNullable<DriverRolloutPolicy['podDeletion']>): string | null {
  if (pod.controllerKind === null && !settings.force) return 'not managed by a controller; set podDeletion.force';
  if (pod.usesEmptyDir && !settings.deleteEmptyDir) return 'uses emptyDir; set podDeletion.deleteEmptyDir';
  return null;
}

function fallBack(node: NodeContext, ctx: StepContext, why: string): StepResult {
  if (ctx.policy.drain.enable) return advance('drain-required', true, [], `${why}; draining the node instead`);
  return fail(node, ctx, `${why}; drain is not enabled`);
}
