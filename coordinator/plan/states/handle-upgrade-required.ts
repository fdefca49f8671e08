import { isInUpgradeCycle, needsUpgrade } from '../needs-upgrade.ts';
import { advance, wait, type StateHandler } from '../step.ts';

/**
 * Waiting to start. Starting (taking a slot) is decided for all candidates together in
 * plan-upgrades.ts; here only: is there still anything to do? A node whose driver became current
 * before it started (e.g. the DaemonSet was rolled back) goes straight to upgrade-done, unless an
 * earlier cycle left it cordoned (then it runs the flow so that it is uncordoned properly).
 */
export const handleUpgradeRequired: StateHandler = (node, ctx) => {
  const keys = ctx.policy.keys;
  if (node.driver.revisionUnknown) {
    const text = 'newest revision of the driver DaemonSet not known yet';
    return wait({ code: 'revision-unknown', message: text, detail: text });
  }
  if (node.driver.pods.length > 0 && !needsUpgrade(node, keys) && !isInUpgradeCycle(node.view.annotations, keys)) {
    return advance('upgrade-done', false);
  }
  return { kind: 'candidate', actions: [] };
};
