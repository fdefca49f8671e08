import type { DriverRolloutPolicy } from './driver-rollout-spec.ts';

/**
 * For each driver (`<keyDomain>/<driverName>`), the drivers whose DriverRollouts load after it
 * (their `loadsAfter` names it, in the same keyDomain), sorted: what ClusterSnapshot.dependents
 * gives each rollout's planner.
 */
export function dependentDrivers(policies: readonly Pick<DriverRolloutPolicy, 'driverName' | 'keyDomain' | 'loadsAfter'>[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const p of policies) {
    for (const dependency of p.loadsAfter) {
      const key = `${p.keyDomain}/${dependency}`;
      const list = out.get(key) ?? [];
      if (!list.includes(p.driverName)) list.push(p.driverName);
      out.set(key, list.sort());
    }
  }
  return out;
}
