import type { NodeAction } from '../action.ts';
import { listPods } from '../device-pods.ts';
import { isWaitingForSafeLoad } from '../needs-upgrade.ts';
import { advance, fail, wait, type StateHandler } from '../step.ts';

/** Upstream's limit: a driver container not Ready after more restarts than this fails the node. */
export const MAX_DRIVER_RESTARTS = 10;

/**
 * Restart the driver: delete the out-of-date driver pod (its DaemonSet uses OnDelete and
 * recreates it at the new revision). Safe load: once the pod is current, remove the
 * wait-for-safe-load annotation instead, which lets its init container finish and the driver
 * load. When the current pod is Ready → validation-required (if configured) or
 * uncordon-required; not Ready after more than MAX_DRIVER_RESTARTS restarts → upgrade-failed.
 */
export const handlePodRestart: StateHandler = (node, ctx) => {
  const name = node.view.snapshot.name;
  const keys = ctx.policy.keys;
  const driver = node.driver;
  if (driver.outOfDate.length > 0) {
    const deletes: NodeAction[] = driver.outOfDate.map((p) => ({
      kind: 'deleteDriverPod',
      node: name,
      pod: { namespace: p.namespace, name: p.name, uid: p.uid },
    }));
    return wait(
      { code: 'waiting-for-driver-pod', message: `restarting out-of-date driver pod ${listPods(driver.outOfDate)}`, detail: `deleting out-of-date driver pod ${listPods(driver.outOfDate)}` },
      deletes,
    );
  }
  if (driver.pods.length === 0) {
    const text = 'waiting for the DaemonSet to create the driver pod';
    return wait({ code: 'waiting-for-driver-pod', message: text, detail: text });
  }
  if (driver.revisionUnknown) {
    const text = 'newest revision of the driver DaemonSet not known yet';
    return wait({ code: 'revision-unknown', message: text, detail: text });
  }
  const actions: NodeAction[] = [];
  if (isWaitingForSafeLoad(node.view.annotations, keys)) actions.push({ kind: 'clearSafeLoad', node: name, key: keys.waitForSafeLoad });
  if (driver.ready) {
    return advance(ctx.policy.validation.podSelector === null ? 'uncordon-required' : 'validation-required', true, actions);
  }
  if (driver.restartCount > MAX_DRIVER_RESTARTS) {
    return fail(node, ctx, `driver pod ${listPods(driver.pods)} is not Ready after ${driver.restartCount} restarts`, actions);
  }
  return wait(
    {
      code: 'waiting-for-driver-pod',
      message: `waiting for driver pod ${listPods(driver.pods)} to become Ready`,
      detail: `waiting for driver pod ${listPods(driver.pods)} to become Ready (${driver.restartCount} restarts)`,
    },
    actions,
  );
};
