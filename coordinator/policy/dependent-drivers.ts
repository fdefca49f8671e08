import type { DependentDriverSnapshot } from '../plan/snapshot.ts';
import type { DriverRolloutPolicy } from './driver-rollout-spec.ts';

/** A valid DriverRollout as the dependents need it: its policy and the driver DaemonSets its selector picks (`<namespace>/<name>`). */
export interface DependentRollout {
  readonly policy: Pick<DriverRolloutPolicy, 'driverName' | 'keyDomain' | 'loadsAfter' | 'devicePods'>;
  readonly daemonSets: readonly string[];
}

/**
 * For each driver (`<keyDomain>/<driverName>`), the drivers whose DriverRollouts load after it
 * (their `loadsAfter` names it, in the same keyDomain), sorted by driver name, each with its
 * rollout's DaemonSets and device pods: what ClusterSnapshot.dependents gives each rollout's
 * planner. Two rollouts of one driver (a conflict, reported elsewhere) give one entry with the
 * DaemonSets of both: the pods of either hold the dependency.
 */
export function dependentDrivers(rollouts: readonly DependentRollout[]): Map<string, DependentDriverSnapshot[]> {
  const out = new Map<string, DependentDriverSnapshot[]>();
  for (const { policy, daemonSets } of rollouts) {
    for (const dependency of policy.loadsAfter) {
      const key = `${policy.keyDomain}/${dependency}`;
      const list = out.get(key) ?? [];
      const at = list.findIndex((d) => d.driver === policy.driverName);
      const known = list[at];
      if (known === undefined) list.push({ driver: policy.driverName, daemonSets: [...daemonSets].sort(), devicePods: policy.devicePods });
      else list[at] = { ...known, daemonSets: [...new Set([...known.daemonSets, ...daemonSets])].sort() };
      out.set(key, list.sort((a, b) => (a.driver < b.driver ? -1 : a.driver > b.driver ? 1 : 0)));
    }
  }
  return out;
}
