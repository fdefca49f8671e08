import { advance, type StateHandler } from '../step.ts';

/**
 * Cordon. The node stays in cordon-required until a snapshot shows it cordoned: what runs on the
 * node must be looked at in a snapshot taken after the cordon, or a pod scheduled meanwhile could
 * be missed. The pass that enters the state cordons in the same write (one patch: the state label
 * still shows cordon-required, as upstream's, before the node moves on), so the next pass can move
 * the node on; wait-for-jobs-required is stored only when its step has something to wait for.
 */
export const handleCordonRequired: StateHandler = (node) => {
  if (node.view.unschedulable) return advance('wait-for-jobs-required', true);
  return { kind: 'idle', actions: [{ kind: 'cordon', node: node.view.snapshot.name }] };
};
