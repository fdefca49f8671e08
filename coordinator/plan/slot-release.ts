/**
 * Slots a pass gives back and hands on in the same pass (the slot handoff). A node this
 * pass moves out of its upgrade (upgrade-done and uncordoned, or upgrade-failed) frees its slot
 * only once its plan is stored. Instead of leaving that slot to a later pass (a debounce and a
 * pass after the write's answer), the pass may give it to a waiting node whose plan then runs
 * only after the freeing node's plan has been carried out (NodePlan.after): the next node's
 * cordon is sent once the last one's uncordon is stored, never before, so the cluster never has
 * more nodes out than the limits allow, in any order the writes are answered or fail.
 * Why: docs/decisions/0002-fewer-round-trips-per-node.md.
 */
import { isOutOfService, isUpgrading, slotShortage, takeSlot, type Membership, type PoolBudget } from './pool-capacity.ts';

/** A count a node's plan lowers once it is stored. */
export interface SlotRelease {
  readonly node: string;
  /** No longer out of service (uncordoned, not upgrading, Ready). */
  readonly unavailable: boolean;
  /** No longer upgrading (maxParallelUpgrades). */
  readonly upgrading: boolean;
}

/** The counts `node`'s plan frees, from what it counted at the start of the pass to what the pass leaves; null when none. */
export function slotReleaseOf(node: string, before: Membership, after: Membership): SlotRelease | null {
  const unavailable = isOutOfService(before) && !isOutOfService(after);
  const upgrading = isUpgrading(before.state) && !isUpgrading(after.state);
  return unavailable || upgrading ? { node, unavailable, upgrading } : null;
}

/**
 * Gives a node that found no slot in `budget` one that a release in `releases` frees, if one does:
 * the first such release (by node name, so the plan does not depend on the order nodes are listed)
 * is taken out of `releases` and counted as stored, and the node takes the slot. Returns the
 * freeing node, whose plan the starting node's must wait for; null (nothing changed) when no
 * single release makes room. (A node that frees a slot never ends the pass in upgrade-required,
 * so it never takes one; should a handler ever make one do both, the executor drops a plan that
 * names one that waits itself, so no two plans ever wait on each other.)
 */
export function takeReleasedSlot(budget: PoolBudget, releases: SlotRelease[], nodeOutOfService: boolean): string | null {
  let chosen = -1;
  for (const [i, release] of releases.entries()) {
    if (!makesRoom(budget, release, nodeOutOfService)) continue;
    if (chosen === -1 || release.node < (releases[chosen]?.node ?? '')) chosen = i;
  }
  const release = releases[chosen];
  if (release === undefined) return null;
  releases.splice(chosen, 1);
  countRelease(budget, release, -1);
  takeSlot(budget, nodeOutOfService);
  return release.node;
}

function makesRoom(budget: PoolBudget, release: SlotRelease, nodeOutOfService: boolean): boolean {
  countRelease(budget, release, -1);
  const shortage = slotShortage(budget, nodeOutOfService);
  countRelease(budget, release, 1);
  return shortage === null;
}

/** Adds `delta` to each count the release frees (-1: counts it as stored; 1: undoes that). */
function countRelease(budget: PoolBudget, release: SlotRelease, delta: -1 | 1): void {
  if (release.unavailable) budget.unavailable += delta;
  if (release.upgrading) budget.upgrading += delta;
}
