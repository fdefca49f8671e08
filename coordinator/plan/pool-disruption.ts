/**
 * A pool with too many nodes NotReady at once: a disruption of the pool (a rack's network, an
 * overloaded API server, a control plane whose node heartbeats fell behind), not of any one node.
 * Modelled on the node lifecycle controller's disruption modes (kube-controller-manager
 * `--unhealthy-zone-threshold`, "PartialDisruption": more than 2 nodes NotReady and at least that
 * share of the zone), with a lower share: here the cost of a wrong call is only a held rollout,
 * while missing one fails and leaves cordoned a good part of the fleet.
 *
 * While a pool is disrupted no node of it starts an upgrade (start-checks.ts), and NotReady time
 * fails none of its nodes (node-not-ready.ts): their NotReady clocks are frozen, and count afresh
 * from the moment the pool is healthy again. A lone node NotReady in a healthy pool still fails
 * after its limit.
 */
import type { PoolBudget } from './pool-capacity.ts';

/** A pool is disrupted when at least this many of its nodes are NotReady at once... */
export const DISRUPTED_MIN_NODES = 3;
/** ...and they are at least this share of its managed nodes (percent). */
export const DISRUPTED_SHARE_PERCENT = 20;

/** The NotReady count of a disrupted pool; absent from the map: the pool is healthy. */
export interface PoolDisruption {
  readonly pool: string;
  readonly notReady: number;
  readonly total: number;
}

export function isDisrupted(notReady: number, total: number): boolean {
  return notReady >= DISRUPTED_MIN_NODES && notReady * 100 >= total * DISRUPTED_SHARE_PERCENT;
}

/** Pool name → its disruption, for the pools disrupted now (counted from the snapshot, before the pass). */
export function poolDisruptions(budgets: Iterable<PoolBudget>): ReadonlyMap<string, PoolDisruption> {
  const disrupted = new Map<string, PoolDisruption>();
  for (const b of budgets) {
    if (isDisrupted(b.notReady, b.total)) disrupted.set(b.pool.name, { pool: b.pool.name, notReady: b.notReady, total: b.total });
  }
  return disrupted;
}

/** "pool gpu-a has 40 of 120 nodes NotReady (a disruption: at least 3 nodes and 20%)". */
export function describeDisruption(d: PoolDisruption): string {
  return `pool ${d.pool} has ${d.notReady} of ${d.total} nodes NotReady (a disruption: at least ${DISRUPTED_MIN_NODES} nodes and ${DISRUPTED_SHARE_PERCENT}% of the pool)`;
}
