import { isUpgradeRequested, isWaitingForSafeLoad } from '../needs-upgrade.ts';
import { advance, wait, type StateHandler } from '../step.ts';
import { checkValidators } from './handle-validation.ts';

/**
 * Failed: the node stays cordoned. It leaves by itself once its driver pod is current and Ready
 * and, when validation is configured, its validator pods are Ready too (→ uncordon-required,
 * which honours the initial-state annotation); so a validation timeout does not undo itself in
 * the same pass. An admin retries by
 * relabelling it upgrade-required or setting the upgrade-requested annotation.
 */
export const handleUpgradeFailed: StateHandler = (node, ctx) => {
  const keys = ctx.policy.keys;
  if (isUpgradeRequested(node.view.annotations, keys)) return advance('upgrade-required', true);
  if (node.driver.ready && !isWaitingForSafeLoad(node.view.annotations, keys) && checkValidators(node, ctx).passed) {
    return advance('uncordon-required', true);
  }
  const message = node.view.annotations[keys.upgradeReason] ?? 'upgrade failed';
  return wait({
    code: 'upgrade-failed',
    message,
    detail: `${message}; relabel ${keys.upgradeState}=upgrade-required to retry`,
  });
};
