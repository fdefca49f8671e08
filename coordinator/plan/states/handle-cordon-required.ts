import { cordonHolderOf } from '../../../shared/keys.ts';
import type { NodeAction } from '../action.ts';
import { cordonHolders } from '../cordon-holders.ts';
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
 *
 * The cordon is this driver's hold (cordon-holders.ts), written against the node as the API
 * server has it, with its resourceVersion: a node another driver holds gets this one added (a
 * view that still shows it cordoned after an outside uncordon costs a conflict and a re-read,
 * and the node is cordoned again); a node cordoned by none of ours (an admin's cordon) is left
 * as it is, without a write.
 */
export const handleCordonRequired: StateHandler = (node, ctx) => {
  const holder = cordonHolderOf(ctx.policy.keys);
  const holders = cordonHolders(node.view.annotations);
  if (node.view.unschedulable && (holders.length === 0 || holders.includes(holder))) return skip('wait-for-jobs-required', 'already cordoned');
  const snapshot = node.view.snapshot;
  const name = snapshot.name;
  const check: NodeAction = { kind: 'requireSamePods', node: name, podUids: [...snapshot.driverPods, ...snapshot.pods].map((p) => p.uid) };
  return advance('wait-for-jobs-required', true, [{ kind: 'cordon', node: name, holder }, check]);
};
