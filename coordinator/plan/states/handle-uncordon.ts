import type { NodeAction } from '../action.ts';
import { cycleClosingRemovals } from '../needs-upgrade.ts';
import { otherDriverHolds } from '../other-drivers.ts';
import { restoreDeviceClients } from '../device-clients.ts';
import type { StateHandler } from '../step.ts';

/**
 * Uncordon and finish, unless the node was cordoned before the upgrade began (initial-state
 * annotation): then it stays cordoned. The state label is written before the initial-state
 * annotation is dropped, so a crash in between never leaves uncordon-required without it; and the
 * cycle's start time goes before the initial-state annotation, so a crash in between never leaves
 * a node that looks mid-cycle (start time set) while its admin cordon is forgotten. While another
 * driver's upgrade still holds the node (upgrading or failed), it is left cordoned for that
 * driver to uncordon when it finishes.
 */
export const handleUncordon: StateHandler = (node, ctx) => {
  const keys = ctx.policy.keys;
  const name = node.view.snapshot.name;
  const cordonedByAdmin = node.view.annotations[keys.initialStateUnschedulable] !== undefined;
  const heldByOthers = otherDriverHolds(node.view.labels, node.view.annotations, keys);
  // Operands paused for this upgrade come back before the node is schedulable (a failed node recovering passes here).
  const before: NodeAction[] = [
    ...restoreDeviceClients(node, ctx),
    ...(!cordonedByAdmin && heldByOthers.length === 0 && node.view.unschedulable ? [{ kind: 'uncordon', node: name } as const] : []),
  ];
  const after: NodeAction[] = cycleClosingRemovals(node.view.annotations, name, keys);
  const note = heldByOthers.length > 0 && !cordonedByAdmin && node.view.unschedulable
    ? { warning: `left cordoned for ${heldByOthers.map((h) => `the ${h.driver} driver upgrade (${h.state})`).join(', ')}` }
    : {};
  return { kind: 'advance', to: 'upgrade-done', actions: before, chain: false, after, ...note };
};
