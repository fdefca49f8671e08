import { isUpgrading } from '../plan/pool-capacity.ts';
import type { NodePlan } from '../plan/action.ts';

/**
 * Whether carrying out `plan` could raise a count that limits other nodes: a node taken out of
 * service (a cordon), one more upgrading (a state change into cordon-required … validation-required
 * from outside them), one more failed (upgrade-failed, which maxFailedNodes counts), or a label
 * other than the state (a pool's selector might read it). A pass must see such a plan carried
 * out before it hands out slots again.
 *
 * Every other plan only keeps or lowers those counts (an upgrading node moving on, uncordon,
 * upgrade-done, upgrade-required, annotations, pod deletions and evictions, Events), so the next
 * pass may plan while it is still being carried out: the snapshot, taken before its writes land,
 * counts at least as many nodes against each limit as there really are.
 */
export function mayRaiseCounts(plan: NodePlan): boolean {
  return plan.actions.some((a) => {
    switch (a.kind) {
      case 'cordon':
      case 'setLabel':
        return true;
      case 'setState':
        return a.to === 'upgrade-failed' || (isUpgrading(a.to) && !isUpgrading(a.from));
      default:
        return false;
    }
  });
}
