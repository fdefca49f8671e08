import type { NodeAction } from '../action.ts';
import { cycleAnnotationKeys, needsUpgrade } from '../needs-upgrade.ts';
import { advance, type StateHandler } from '../step.ts';

/**
 * Up to date. A new DaemonSet revision, a safe-load request or the upgrade-requested annotation
 * sends the node back to upgrade-required. Leftover bookkeeping annotations (a crash between two
 * writes of an earlier pass) are removed here.
 */
export const handleUpgradeDone: StateHandler = (node, ctx) => {
  const keys = ctx.policy.keys;
  if (node.driver.pods.length > 0 && needsUpgrade(node, keys)) return advance('upgrade-required', true);
  const annotations = node.view.annotations;
  const stale: NodeAction[] = [];
  for (const key of cycleAnnotationKeys(keys)) if (annotations[key] !== undefined) stale.push({ kind: 'removeAnnotation', node: node.view.snapshot.name, key });
  if (annotations[keys.failedRevision] !== undefined) stale.push({ kind: 'removeAnnotation', node: node.view.snapshot.name, key: keys.failedRevision });
  // After the cycle keys, as in uncordon-required (a crash in between must not forget an admin cordon).
  if (annotations[keys.initialStateUnschedulable] !== undefined) {
    stale.push({ kind: 'removeAnnotation', node: node.view.snapshot.name, key: keys.initialStateUnschedulable });
  }
  return { kind: 'idle', actions: stale };
};
