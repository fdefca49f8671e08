import { isUpgradeRequested, isWaitingForSafeLoad } from '../needs-upgrade.ts';
import { advance, driverRevisionOf, wait, type StateHandler } from '../step.ts';
import { checkValidators } from './handle-validation.ts';

/**
 * Failed: the node stays cordoned. It leaves by itself once the node is Ready, its driver pod
 * current and Ready and, when validation is configured, its validator pods Ready too (→ uncordon-required,
 * which honours the initial-state annotation); so a validation timeout does not undo itself in
 * the same pass. It is retried (→ upgrade-required) when an admin relabels it upgrade-required
 * or sets the upgrade-requested annotation, when a dependency's maintenance stopped its driver
 * (the stopped-for mark, load-order.ts), or by itself when the driver DaemonSet has a newer
 * revision than the one it failed at (a fixed driver was pushed) and its pod is out of date. A
 * retried node keeps the failed-revision annotation until upgrade-done, so it still counts
 * against maxFailedNodes meanwhile (plan-upgrades.ts).
 */
export const handleUpgradeFailed: StateHandler = (node, ctx) => {
  const keys = ctx.policy.keys;
  const annotations = node.view.annotations;
  // A dependency's maintenance stopped the driver (load-order.ts): its own flow brings it back.
  if (isUpgradeRequested(annotations, keys) || annotations[keys.stoppedFor] !== undefined) return advance('upgrade-required', true);
  // Not while the node is NotReady: its pods' Ready conditions are what its kubelet last said (node-not-ready.ts).
  if (node.view.snapshot.ready && node.driver.ready && !isWaitingForSafeLoad(annotations, keys) && checkValidators(node, ctx).passed) {
    return advance('uncordon-required', true);
  }
  const failedAt = annotations[keys.failedRevision];
  const now = driverRevisionOf(node, ctx);
  if (failedAt !== undefined && node.driver.outOfDate.length > 0 && now !== '' && now !== failedAt) {
    return { kind: 'advance', to: 'upgrade-required', actions: [], chain: true, warning: `retrying: the driver DaemonSet has a new revision (${now}; failed at ${failedAt})` };
  }
  const message = annotations[keys.upgradeReason] ?? 'upgrade failed';
  return wait({
    code: 'upgrade-failed',
    message,
    detail: `${message}; relabel ${keys.upgradeState}=upgrade-required to retry, or push a new driver revision`,
  });
};
