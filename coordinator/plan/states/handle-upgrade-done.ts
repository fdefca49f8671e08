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
  const name = node.view.snapshot.name;
  const stale: NodeAction[] = [...cycleAnnotationKeys(keys), keys.initialStateUnschedulable]
    .filter((key) => node.view.annotations[key] !== undefined)
    .map((key) => ({ kind: 'removeAnnotation', node: name, key }));
  return { kind: 'idle', actions: stale };
};
