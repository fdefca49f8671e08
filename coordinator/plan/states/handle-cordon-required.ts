import { advance, type StateHandler } from '../step.ts';

/**
 * Cordon. When this pass cordons the node it stops here: what runs on the node must be looked at
 * in a snapshot taken after the cordon, or a pod scheduled meanwhile could be missed.
 */
export const handleCordonRequired: StateHandler = (node) => {
  if (node.view.unschedulable) return advance('wait-for-jobs-required', true);
  return advance('wait-for-jobs-required', false, [{ kind: 'cordon', node: node.view.snapshot.name }]);
};
