/**
 * Node lists known to be in name order (UTF-16 code units, as `<` and Array.prototype.sort compare
 * strings). The snapshot builder makes `ClusterSnapshot.nodes` in that order and marks the list, so
 * that a pass over thousands of nodes need not compare every name again to know it (the status's
 * first waiting nodes, rollout-status.ts). Only the code that made a list may mark it, and only a
 * list nothing modifies afterwards (snapshots never are); an unmarked list is simply checked.
 */
import type { NodeSnapshot } from './snapshot.ts';

const inNameOrder = new WeakSet<readonly NodeSnapshot[]>();

/** Marks `nodes`, made in name order, as such; returns it. */
export function markedAsByName<T extends readonly NodeSnapshot[]>(nodes: T): T {
  inNameOrder.add(nodes);
  return nodes;
}

/** `nodes` was marked by markedAsByName: it is in name order without a look at its names. */
export function isKnownByName(nodes: readonly NodeSnapshot[]): boolean {
  return inNameOrder.has(nodes);
}
