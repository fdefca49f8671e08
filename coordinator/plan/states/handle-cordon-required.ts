import type { NodeAction } from '../action.ts';
import { advance, skip, type StateHandler } from '../step.ts';

/**
 * Cordon, and move on in the same pass. What runs on the node must be looked at after the
 * cordon is stored, or a pod scheduled meanwhile could be missed: the steps that follow are
 * planned now, from the pods this snapshot shows, behind a check (requireSamePods) that the
 * executor makes once the cordon's patch is answered. Their writes go out only if the node's
 * pods are still the same then, as a pass planned at that moment would see them; otherwise the
 * node stays in cordon-required, cordoned, and the next pass plans its steps afresh. The cordon
 * rides in the write that stores cordon-required (one patch, the label showing cordon-required
 * as upstream's does before the node moves on); wait-for-jobs-required is stored only when its
 * step has something to wait for.
 */
export const handleCordonRequired: StateHandler = (node) => {
  if (node.view.unschedulable) return skip('wait-for-jobs-required', 'already cordoned');
  const snapshot = node.view.snapshot;
  const name = snapshot.name;
  const check: NodeAction = { kind: 'requireSamePods', node: name, podUids: [...snapshot.driverPods, ...snapshot.pods].map((p) => p.uid) };
  return advance('wait-for-jobs-required', true, [{ kind: 'cordon', node: name }, check]);
};
