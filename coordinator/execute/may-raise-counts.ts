import { isUpgrading } from '../plan/pool-capacity.ts';
import type { NodePlan } from '../plan/action.ts';
import type { UpgradeState } from '../../shared/keys.ts';

/**
 * Whether carrying out `plan` could raise a count that limits other nodes: a node taken out of
 * service (a cordon of a node not yet upgrading), one more upgrading (a state change into
 * cordon-required … validation-required from outside them), one more failed (upgrade-failed,
 * which maxFailedNodes counts), or a label other than the state (a pool's selector might read
 * it). A pass must see such a plan's raising writes stored before it hands out slots again.
 *
 * Every other plan only keeps or lowers those counts (an upgrading node moving on, uncordon,
 * upgrade-done, upgrade-required, annotations, pod deletions and evictions, Events), so the next
 * pass may plan while it is still being carried out: the snapshot, taken before its writes land,
 * counts at least as many nodes against each limit as there really are.
 */
export function mayRaiseCounts(plan: NodePlan): boolean {
  return countedPrefix(plan) > 0;
}

/**
 * How many of the plan's leading actions, Events not counted, must be stored before the next
 * pass may hand out slots: those up to its last action that may raise a count (0: none). What
 * follows only keeps or lowers the counts once they are stored. A cordon raises nothing when the
 * node is already upgrading by then (an upgrading node is out of service whether cordoned or
 * not), so a start (→ cordon-required, then the cordon) is counted once its first patch is
 * stored; the executor writes the cordon in that same patch (coalesceNodeActions), and whatever
 * follows a pod action goes on beside the passes.
 */
export function countedPrefix(plan: NodePlan): number {
  const actions = plan.actions.filter((a) => a.kind !== 'emitEvent');
  // The node's state as the plan goes: where its first state change starts from (unknown until then).
  let state: UpgradeState | null = actions.find((a) => a.kind === 'setState')?.from ?? null;
  let counted = 0;
  actions.forEach((a, i) => {
    let raises = false;
    if (a.kind === 'setLabel') raises = true;
    else if (a.kind === 'cordon') raises = state === null || !isUpgrading(state);
    else if (a.kind === 'setState') {
      raises = a.to === 'upgrade-failed' || (isUpgrading(a.to) && !isUpgrading(a.from));
      state = a.to;
    }
    if (raises) counted = i + 1;
  });
  return counted;
}
