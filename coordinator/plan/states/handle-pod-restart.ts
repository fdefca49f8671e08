import type { NodeAction } from '../action.ts';
import { listPods, usesDevice } from '../device-pods.ts';
import { recreatedClientWarnings, restoreDeviceClients, stopDeviceClients } from '../device-clients.ts';
import { driverFailure, REBOOT_REQUIRED_REASON, type DriverFailure } from '../driver-failure.ts';
import { stopDependents, waitingForDependenciesToLoad } from '../load-order.ts';
import type { DriverPodStatus } from '../driver-pod-status.ts';
import { cycleClosingRemovals, isWaitingForSafeLoad } from '../needs-upgrade.ts';
import { isRestartOnlyCycle, RESTART_ONLY_TEXT, unchangedDriver } from '../restart-only.ts';
import { advance, fail, readTimer, timeoutText, wait, type NodeContext, type Reason, type StateHandler, type StepContext, type StepResult, type Timer } from '../step.ts';

/** Upstream's limit: a driver pod not Ready after more restarts than this (containers or init containers) fails the node. */
export const MAX_DRIVER_RESTARTS = 10;

/**
 * Restart the driver: delete the out-of-date driver pod (its DaemonSet uses OnDelete and
 * recreates it at the new revision). Never while a pod that uses the device (device resource or
 * podDeletion.podSelector) is still on the node, terminating or not: the node waits, naming it. Safe load: once the pod is current, remove the
 * wait-for-safe-load annotation instead, which lets its init container finish and the driver
 * load. When the current pod is Ready → validation-required (if configured) or
 * uncordon-required. upgrade-failed, whichever comes first:
 * - the agent has reported a failure reason on the current pod and the pod has not become Ready
 *   within podRestart.failAfterSeconds of the first such report (the agent retries in-process,
 *   keeping the failure's reason while it does; only Ready, or leaving the state, resets this);
 * - no Ready pod podRestart.timeoutSeconds after the state began, whatever the cause;
 * - more than MAX_DRIVER_RESTARTS restarts (upstream's rule);
 * - at once when the agent reports RebootRequired (a never-unload module): the node needs a reboot.
 * Both start times live in annotations, so a restarted coordinator keeps counting.
 * Drivers that load after one another go in order on a node (load-order.ts): this driver is
 * replaced only once those that load after it have stopped (stopped by this step when their own
 * restart does not), and loads only once those it loads after have.
 * Restart only (restart-only.ts; the node was not cordoned): no device-user hold and no operand
 * pausing, every reason says so, Ready → upgrade-done; and should the template change meanwhile
 * to another driver than the loaded one, → cordon-required (the full path) before any deletion.
 */
export const handlePodRestart: StateHandler = (node, ctx) => {
  const result = restartDriver(node, ctx);
  if (!isRestartOnlyCycle(node.view.annotations, ctx.policy.keys)) return withWarnings(result, recreatedClientWarnings(node, ctx));
  if (result.kind !== 'wait') return result;
  const { reason } = result;
  return { ...result, reason: { ...reason, message: `${RESTART_ONLY_TEXT}: ${reason.message}`, detail: `${RESTART_ONLY_TEXT}: ${reason.detail}` } };
};

/** The step's result with the recreated-client Warnings (and their record) ahead of its own actions. */
function withWarnings(result: StepResult, warnings: readonly NodeAction[]): StepResult {
  return warnings.length === 0 ? result : { ...result, actions: [...warnings, ...result.actions] };
}

function restartDriver(node: NodeContext, ctx: StepContext): StepResult {
  const name = node.view.snapshot.name;
  const keys = ctx.policy.keys;
  const driver = node.driver;
  const timer = readTimer(node, ctx, keys.podRestartStartTime, ctx.policy.podRestart.timeoutSeconds);
  const restartOnly = isRestartOnlyCycle(node.view.annotations, keys);
  if (restartOnly && driver.outOfDate.length > 0 && unchangedDriver(node, ctx) === null) return escalate(node, ctx);
  const held = restartOnly ? null : (holdForDeviceUsers(node, ctx, timer) ?? holdForLoadOrder(node, ctx, timer));
  if (held !== null) return held;
  if (driver.outOfDate.length > 0) {
    const outOfDate = listPods(driver.outOfDate);
    if (timer.expired) return fail(node, ctx, `${expired(ctx)}: out-of-date driver pod ${outOfDate} still terminating`);
    const deletes: NodeAction[] = driver.outOfDate.map((p) => ({
      kind: 'deleteDriverPod',
      node: name,
      pod: { namespace: p.namespace, name: p.name, uid: p.uid },
    }));
    return wait(
      { code: 'waiting-for-driver-pod', message: restartingText(ctx), detail: `deleting out-of-date driver pod ${outOfDate} ${timer.progress}` },
      [...timer.actions, ...deletes],
      timer.deadline,
    );
  }
  if (driver.pods.length === 0) {
    if (timer.expired) return fail(node, ctx, `${expired(ctx)}: the DaemonSet has not created one`);
    return wait({ code: 'waiting-for-driver-pod', message: restartingText(ctx), detail: `waiting for the DaemonSet to create the driver pod ${timer.progress}` }, timer.actions, timer.deadline);
  }
  if (driver.revisionUnknown) {
    const text = 'newest revision of the driver DaemonSet not known yet';
    return wait({ code: 'revision-unknown', message: text, detail: text });
  }
  const actions: NodeAction[] = [];
  if (isWaitingForSafeLoad(node.view.annotations, keys)) actions.push({ kind: 'clearSafeLoad', node: name, key: keys.waitForSafeLoad });
  if (driver.ready) return finish(node, ctx, restartOnly, actions);
  return judgeNotReady(node, ctx, timer, actions);
}

/** The current driver pod is not Ready: fail it (agent's failure, restarts, timeout) or wait, saying why. */
function judgeNotReady(node: NodeContext, ctx: StepContext, timer: Timer, actions: readonly NodeAction[]): StepResult {
  const driver = node.driver;
  const settings = ctx.policy.podRestart;
  const pods = listPods(driver.pods);
  const failure = driverFailure(driver.pods);
  if (failure?.reason === REBOOT_REQUIRED_REASON) return fail(node, ctx, `node needs a reboot: driver pod ${pods}: ${failure.message}`, actions);
  const failing = failure === null || settings.failAfterSeconds === 0 ? null : readTimer(node, ctx, ctx.policy.keys.driverFailingSince, settings.failAfterSeconds);
  if (failure !== null && failing?.expired === true) {
    return fail(node, ctx, `driver pod ${pods} failed: ${failure.reason}: ${failure.message}`, actions);
  }
  if (driver.restartCount > MAX_DRIVER_RESTARTS) {
    return fail(node, ctx, `driver pod ${pods} is not Ready after ${driver.restartCount} restarts${driver.waiting === null ? '' : ` (${driver.waiting})`}`, actions);
  }
  if (timer.expired) return fail(node, ctx, `${expired(ctx)}: ${whyNotReady(driver, failure)}`, actions);
  const wakeAt = earliest(timer.deadline, failing?.deadline ?? null);
  if (failure !== null) {
    return wait(
      {
        code: 'driver-failing',
        message: `driver pod ${pods} failing: ${failure.reason}: ${failure.message} (fails the node after ${settings.failAfterSeconds}s)`,
        detail: `driver pod ${pods} failing: ${failure.reason}: ${failure.message} ${failing?.progress ?? ''}`.trimEnd(),
      },
      [...actions, ...timer.actions, ...(failing?.actions ?? [])],
      wakeAt,
    );
  }
  // driver.waiting names its pod: "<namespace>/<name> <container>: <reason>: <message>".
  const waiting = driver.waiting === null ? `waiting for driver pod ${pods} to become Ready` : `waiting for the driver pod to become Ready: ${driver.waiting}`;
  return wait(
    {
      code: 'waiting-for-driver-pod',
      message: driver.waiting === null ? restartingText(ctx) : `${waiting} (${timeoutText(settings.timeoutSeconds)})`,
      detail: `${waiting} ${timer.progress} (${driver.restartCount} restarts)`,
    },
    [...actions, ...timer.actions],
    wakeAt,
  );
}

/**
 * Before the driver is replaced (an out-of-date pod, or a safe load to release): never under a
 * running pod that uses the device (it would lose the device mid-flight), and DaemonSet clients
 * stopped (stopDeviceClients). null when nothing holds the restart. Not on the restart-only path:
 * the driver stays loaded as it is, so its users and clients stay too.
 */
function holdForDeviceUsers(node: NodeContext, ctx: StepContext, timer: Timer): StepResult | null {
  const driver = node.driver;
  if (driver.outOfDate.length === 0 && !isWaitingForSafeLoad(node.view.annotations, ctx.policy.keys)) return null;
  // DaemonSet clients are stopped below (stopDeviceClients); any other device pod should be gone by now.
  const users = node.view.snapshot.pods.filter((p) => p.controllerKind !== 'DaemonSet' && usesDevice(p, ctx.policy.devicePods));
  if (users.length > 0) {
    const text = `driver restart held: ${listPods(users)} still ${users.length === 1 ? 'uses' : 'use'} the device`;
    if (timer.expired) return fail(node, ctx, `${expired(ctx)}: ${text}`);
    return wait({ code: 'device-in-use', message: text, detail: `${text} ${timer.progress}` }, timer.actions, timer.deadline);
  }
  return stopDeviceClients(node, ctx);
}

/**
 * Before this driver is replaced: drivers that load after it, loaded on the node, stopped first
 * (by this step when their own restart does not: stopDependents); before its new driver loads
 * (a safe load released): drivers it loads after, loaded first. null when neither holds it.
 */
function holdForLoadOrder(node: NodeContext, ctx: StepContext, timer: Timer): StepResult | null {
  const replacing = node.driver.outOfDate.length > 0 || isWaitingForSafeLoad(node.view.annotations, ctx.policy.keys);
  if (!replacing) return null;
  const releasing = node.driver.outOfDate.length === 0 && node.driver.pods.length > 0;
  const stop = stopDependents(node, ctx);
  const reason: Reason | null = stop?.reason ?? (releasing ? waitingForDependenciesToLoad(node, ctx) : null);
  if (reason === null) return null;
  if (timer.expired) return fail(node, ctx, `${expired(ctx)}: ${reason.message}`);
  return wait({ ...reason, detail: `${reason.detail} ${timer.progress}` }, [...timer.actions, ...(stop?.actions ?? [])], timer.deadline);
}

/**
 * The current driver pod is Ready: on to validation (passed in the same write when validation is
 * off, as every state of the seed documents' flow); a restart only is done (nothing was cordoned
 * or paused; an admin's cordon stays).
 */
function finish(node: NodeContext, ctx: StepContext, restartOnly: boolean, actions: readonly NodeAction[]): StepResult {
  if (restartOnly) return { kind: 'advance', to: 'upgrade-done', actions, chain: false, after: cycleClosingRemovals(node.view.annotations, node.view.snapshot.name, ctx.policy.keys) };
  return advance('validation-required', true, [...actions, ...restoreDeviceClients(node, ctx)]);
}

/**
 * The template changed again during a restart-only restart and now loads another driver than the
 * one loaded: the full path from the cordon on, before any out-of-date pod is deleted.
 */
function escalate(node: NodeContext, ctx: StepContext): StepResult {
  const name = node.view.snapshot.name;
  const warning = `the driver DaemonSet's new template loads another driver than the one loaded: no longer a restart only; cordoning for the full upgrade`;
  return { kind: 'advance', to: 'cordon-required', actions: [{ kind: 'removeAnnotation', node: name, key: ctx.policy.keys.restartOnly }], chain: true, warning };
}

/**
 * The reason while a restart runs its normal course: the old pod deleted, the new one created,
 * then starting. One text for all three (the pod names are in the detail), so a restart costs no
 * Node write beyond its state change: each new text would be one more patch per node.
 * A pod stuck in a kubelet waiting reason, or failing by the agent's word, gets its own text.
 */
function restartingText(ctx: StepContext): string {
  return `restarting the driver pod (${timeoutText(ctx.policy.podRestart.timeoutSeconds)})`;
}

function expired(ctx: StepContext): string {
  return `no Ready driver pod ${ctx.policy.podRestart.timeoutSeconds}s after the restart began`;
}

/** The best explanation there is: the agent's failure, the kubelet's waiting reason, or the agent's last words. */
function whyNotReady(driver: DriverPodStatus, failure: DriverFailure | null): string {
  const pods = listPods(driver.pods);
  if (failure !== null) return `${pods}: ${failure.reason}: ${failure.message}`;
  if (driver.waiting !== null) return driver.waiting;
  const condition = driver.pods[0]?.agentCondition ?? null;
  return condition === null ? `${pods}: the agent has reported nothing` : `${pods}: the agent says ${condition.reason}: ${condition.message}`;
}

function earliest(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}
