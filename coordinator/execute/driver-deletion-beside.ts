import type { NodeAction } from '../plan/action.ts';
import { isPatch, type ActionGroup } from './coalesce-node-actions.ts';
import { countedPrefix } from './may-raise-counts.ts';

/**
 * The driver pod deletion a node's list may send together with the patch at `groups[at]`
 * instead of after its answer (one round trip less per node:
 * docs/decisions/0002-fewer-round-trips-per-node.md), or undefined when the deletion must wait
 * for the patch.
 *
 * `groups` as coalesceNodeActions makes them. The deletion is the first action after the patch
 * other than its Events, and it may go beside when the patch only moves an upgrading node from
 * one step to the next (into pod-restart-required, a step timer, a reason):
 * - it cordons nothing: evictions and deletions must follow the cordon that keeps their pods
 *   from coming back, and the cordon must be stored first;
 * - it raises no count (countedPrefix: a start, a failure, a label): a restart-only start
 *   (upgrade-required → pod-restart-required, not cordoned) must count the node before its
 *   driver goes down.
 * Either order is then safe to stop in, or crash in: the node is already out of service and
 * cordoned, and the pod-restart step deletes only out-of-date driver pods, so a pass that finds
 * the deletion made and the patch not stored moves the node to pod-restart-required and waits
 * for the new pod, and one that finds the patch stored and the pod not deleted deletes it.
 * Other pod actions keep their place: the device-client record must be stored before those
 * clients are stopped (device-clients.ts).
 */
export function driverDeletionBeside(groups: readonly ActionGroup[], at: number): NodeAction | undefined {
  const patch = groups[at];
  if (patch === undefined || !isPatch(patch)) return undefined;
  const next = groups.slice(at + 1).find((g) => isPatch(g) || g.kind !== 'emitEvent');
  if (next === undefined || isPatch(next) || next.kind !== 'deleteDriverPod') return undefined;
  if (patch.some((a) => a.kind === 'cordon' || a.kind === 'uncordon')) return undefined;
  return countedPrefix({ node: next.node, actions: patch }) === 0 ? next : undefined;
}

