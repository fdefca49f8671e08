import type { ConfigProblem } from '../../shared/errors.ts';

/** A DriverRollout whose spec parsed: what it claims. */
export interface RolloutClaim {
  /** `namespace/name`. */
  readonly key: string;
  /** metadata.creationTimestamp (ISO, whole seconds); the older claim wins. */
  readonly createdAt: string;
  /**
   * Its stored status says it has been acting (a status without a True InvalidSpec). Creation
   * times have one-second resolution: of two rollouts created in the same second, the one already
   * acting keeps its nodes rather than handing them over on the next pass.
   */
  readonly acting: boolean;
  readonly driverName: string;
  /** The state label key, e.g. `nvidia.com/gpu-driver-upgrade-state`: two rollouts writing it would fight over every node. */
  readonly stateLabel: string;
  /** `namespace/name` of each DaemonSet its selector picks. */
  readonly daemonSets: readonly string[];
}

/**
 * Pure: which rollouts must not act because an older one already claims their driver (its node
 * labels and reasons, in any namespace) or one of their DaemonSets. Each loser gets problems with
 * a field path, reported like an invalid spec; the oldest claim (within one second: the one
 * already acting, then the lower namespace/name) keeps working. A loser claims nothing, so a third rollout is judged against the winner only.
 */
export function findRolloutConflicts(claims: readonly RolloutClaim[]): Map<string, ConfigProblem[]> {
  const ordered = [...claims].sort((a, b) => {
    if (a.createdAt !== b.createdAt) return a.createdAt.localeCompare(b.createdAt);
    if (a.acting !== b.acting) return a.acting ? -1 : 1;
    return a.key.localeCompare(b.key);
  });
  const drivers = new Map<string, string>();
  const daemonSets = new Map<string, string>();
  const conflicts = new Map<string, ConfigProblem[]>();
  for (const c of ordered) {
    const problems: ConfigProblem[] = [];
    const driverOwner = drivers.get(c.stateLabel);
    if (driverOwner !== undefined) {
      problems.push({
        path: 'spec.driverName',
        message: `driver "${c.driverName}" is already rolled out by DriverRollout ${driverOwner} (both would write ${c.stateLabel} and the reasons on the same nodes); use one DriverRollout per driver`,
      });
    }
    for (const ds of c.daemonSets) {
      const owner = daemonSets.get(ds);
      if (owner !== undefined) problems.push({ path: 'spec.selector', message: `DaemonSet ${ds} is already managed by DriverRollout ${owner}` });
    }
    if (problems.length > 0) {
      conflicts.set(c.key, problems);
      continue;
    }
    drivers.set(c.stateLabel, c.key);
    for (const ds of c.daemonSets) daemonSets.set(ds, c.key);
  }
  return conflicts;
}
