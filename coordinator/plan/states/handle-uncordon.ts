import { CORDON_HOLDERS_ANNOTATION, cordonHolderOf } from '../../../shared/keys.ts';
import { cordonHolders } from '../cordon-holders.ts';
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
 * driver to uncordon when it finishes. The uncordon lets go of this driver's hold
 * (cordon-holders.ts): the node is schedulable again only when no other holder is left, and a
 * cordon this driver does not hold is never undone.
 */
export const handleUncordon: StateHandler = (node, ctx) => {
  const keys = ctx.policy.keys;
  const name = node.view.snapshot.name;
  const a = node.view.annotations;
  const holder = cordonHolderOf(keys);
  const holders = cordonHolders(a);
  const cordonedByAdmin = a[keys.initialStateUnschedulable] !== undefined;
  const heldByOthers = otherDriverHolds(node.view.labels, a, keys);
  // Another driver upgrading here that has not recorded its hold (an older release) keeps the cordon as it is.
  const unrecorded = heldByOthers.filter((h) => !holders.includes(h.driver));
  const release = holders.includes(holder)
    ? unrecorded.length === 0
    : a[CORDON_HOLDERS_ANNOTATION] === undefined && !cordonedByAdmin && heldByOthers.length === 0 && node.view.unschedulable;
  // Operands paused for this upgrade come back before the node is schedulable (a failed node recovering passes here).
  const before: NodeAction[] = [...restoreDeviceClients(node, ctx), ...(release ? [{ kind: 'uncordon', node: name, holder } as const] : [])];
  const after: NodeAction[] = cycleClosingRemovals(a, name, keys);
  const staying = [
    ...holders.filter((h) => h !== holder).map((h) => ({ driver: h, state: heldByOthers.find((o) => o.driver === h)?.state ?? 'holding its cordon' })),
    ...(holders.includes(holder) ? unrecorded : heldByOthers.filter((h) => !holders.includes(h.driver))),
  ];
  const note = staying.length > 0 && !cordonedByAdmin && node.view.unschedulable
    ? { warning: `left cordoned for ${staying.map((h) => `the ${h.driver} driver upgrade (${h.state})`).join(', ')}` }
    : {};
  return { kind: 'advance', to: 'upgrade-done', actions: before, chain: false, after, ...note };
};
