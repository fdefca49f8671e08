import { needsUpgrade } from '../needs-upgrade.ts';
import { advance, wait, type StateHandler } from '../step.ts';

/** A node not processed yet: label it upgrade-required or upgrade-done. */
export const handleUnknown: StateHandler = (node, ctx) => {
  if (node.driver.pods.length === 0) {
    const text = 'no driver pod on the node';
    return wait({ code: 'no-driver-pod', message: text, detail: text });
  }
  if (needsUpgrade(node, ctx.policy.keys)) return advance('upgrade-required', true);
  if (node.driver.revisionUnknown) {
    const text = 'newest revision of the driver DaemonSet not known yet';
    return wait({ code: 'revision-unknown', message: text, detail: text });
  }
  return advance('upgrade-done', false);
};
