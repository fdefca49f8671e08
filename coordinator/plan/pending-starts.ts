/**
 * Starts planned by an earlier pass and not sent yet (ClusterSnapshot.pendingStarts): a start
 * handed the slot of a node leaving its upgrade waits for that node's plan (slot-release.ts), and
 * a start may wait for room among the writes under way. Meanwhile newer passes plan on newer
 * snapshots; one that would hold the start now revokes it, so a start never goes out after the
 * coordinator has seen, and said on the nodes, that starts must hold (a third of the pool went
 * NotReady, the node itself did, the rollout was paused).
 *
 * Only the checks that a change after the start was planned can raise revoke it: slots, pacing and
 * the canary are counted with the start itself (the snapshot shows it started) and hold nothing
 * back from a node already counted.
 */
import type { RevokedStart } from './action.ts';
import { firstHold, isAlertGated, isHalted, isNotReady, isPaused, isPoolDisrupted, isSkipped, type StartCheck, type StartContext } from './start-checks.ts';
import { isOutsideWindow } from './maintenance-windows.ts';
import type { NodeContext } from './step.ts';

/** The start checks that revoke a pending start, in START_CHECKS order. */
export const REVOKING_CHECKS: readonly StartCheck[] = [isPaused, isSkipped, isHalted, isOutsideWindow, isAlertGated, isPoolDisrupted, isNotReady];

/** The pending starts among `nodes` that a revoking check holds now, with the first hold's reason. */
export function revokedStarts(nodes: readonly NodeContext[], pending: ReadonlySet<string>, ctx: StartContext): RevokedStart[] {
  if (pending.size === 0) return [];
  const revoked: RevokedStart[] = [];
  for (const node of nodes) {
    const name = node.view.snapshot.name;
    if (!pending.has(name)) continue;
    const hold = firstHold(REVOKING_CHECKS, node, ctx);
    if (hold !== null) revoked.push({ node: name, code: hold.reason.code, message: hold.reason.message });
  }
  return revoked;
}
