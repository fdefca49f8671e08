import type { UpgradeState } from '../../shared/keys.ts';
import type { DriverRolloutPolicy } from '../policy/driver-rollout-spec.ts';

/**
 * Whether `state`'s step is switched off by the policy, so a node entering it leaves it in the
 * same pass without doing anything: pod-deletion-required without `podDeletion`, drain-required
 * with `drain.enable` false. Such a state is passed through in the planner (its handler decides
 * that, as upstream's does), but the executor merges the whole pass into one patch, so its label
 * is never stored, and no "updated node state label" Event is sent for it.
 */
export function isStepOff(state: UpgradeState, policy: DriverRolloutPolicy): boolean {
  switch (state) {
    case 'pod-deletion-required':
      return policy.podDeletion === null;
    case 'drain-required':
      return !policy.drain.enable;
    default:
      return false;
  }
}
