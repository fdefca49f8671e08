/**
 * Why a node needs the upgrade flow: its driver pod is out of date, the init container asks for a
 * safe load, an admin/requestor set the upgrade-requested annotation, or a dependency's
 * maintenance stopped the driver (the stopped-for mark, load-order.ts).
 */
import type { DriverKeys } from '../../shared/keys.ts';
import { NODE_ANNOTATIONS, parseNodeAnnotation } from '../../shared/node-annotations.ts';
import type { RemoveAnnotationAction } from './action.ts';
import type { NodeContext } from './step.ts';

/** Safe load: the init container set the annotation (any non-empty value) and blocks until we remove it. */
export function isWaitingForSafeLoad(annotations: Readonly<Record<string, string>>, keys: DriverKeys): boolean {
  const value = parseNodeAnnotation(NODE_ANNOTATIONS.waitForSafeLoad, 'node', keys.waitForSafeLoad, annotations[keys.waitForSafeLoad]);
  return value !== undefined && value !== '';
}

/** `"true"` only; any other value (a problem: not `"true"` or `"false"`) requests nothing. */
export function isUpgradeRequested(annotations: Readonly<Record<string, string>>, keys: DriverKeys): boolean {
  return parseNodeAnnotation(NODE_ANNOTATIONS.upgradeRequested, 'node', keys.upgradeRequested, annotations[keys.upgradeRequested]) === true;
}

export function needsUpgrade(node: NodeContext, keys: DriverKeys): boolean {
  const a = node.view.annotations;
  return node.driver.outOfDate.length > 0 || isWaitingForSafeLoad(a, keys) || isUpgradeRequested(a, keys) || a[keys.stoppedFor] !== undefined;
}

/** An upgrade cycle began and has not reached upgrade-done (it may be in upgrade-failed or relabelled for a retry). */
export function isInUpgradeCycle(annotations: Readonly<Record<string, string>>, keys: DriverKeys): boolean {
  return annotations[keys.upgradeStartTime] !== undefined;
}

/** Timer annotations owned by a state, removed when the node leaves that state. */
export function timerKeysOf(state: string, keys: DriverKeys): readonly string[] {
  // Made once per key set: a pass asks for them on every transition of thousands of nodes.
  let byState = timerKeys.get(keys);
  if (byState === undefined) {
    byState = new Map<string, readonly string[]>([
      ['wait-for-jobs-required', [keys.waitForPodCompletionStartTime]],
      ['pod-deletion-required', [keys.podDeletionStartTime]],
      ['drain-required', [keys.drainStartTime]],
      ['pod-restart-required', [keys.podRestartStartTime, keys.driverFailingSince, keys.operandPauseStartTime, keys.clientsRecreated, keys.clientsStopped]],
      ['validation-required', [keys.validationStartTime]],
    ]);
    timerKeys.set(keys, byState);
  }
  return byState.get(state) ?? NO_KEYS;
}

const NO_KEYS: readonly string[] = [];
const timerKeys = new WeakMap<DriverKeys, ReadonlyMap<string, readonly string[]>>();

const cycleKeys = new WeakMap<DriverKeys, readonly string[]>();

/** Every per-cycle bookkeeping annotation, cleared when a cycle starts afresh or ends. */
export function cycleAnnotationKeys(keys: DriverKeys): readonly string[] {
  let list = cycleKeys.get(keys);
  if (list === undefined) {
    list = [
      keys.waitForPodCompletionStartTime,
      keys.podDeletionStartTime,
      keys.drainStartTime,
      keys.podRestartStartTime,
      keys.driverFailingSince,
      keys.operandPauseStartTime,
      keys.clientsRecreated,
      keys.clientsStopped,
      keys.validationStartTime,
      keys.restartOnly,
      keys.notReadyFrozen,
      keys.notReadyCountedFrom,
      keys.upgradeStartTime,
    ];
    cycleKeys.set(keys, list);
  }
  return list;
}

/**
 * Removals that close a cycle at upgrade-done, run after the state label is written: the cycle's
 * bookkeeping and failed revision, then the initial-state annotation (after the cycle's start
 * time, so a crash in between never leaves a node that looks mid-cycle with its admin cordon forgotten).
 */
export function cycleClosingRemovals(annotations: Readonly<Record<string, string>>, node: string, keys: DriverKeys): RemoveAnnotationAction[] {
  const removals: RemoveAnnotationAction[] = [];
  for (const key of cycleAnnotationKeys(keys)) if (annotations[key] !== undefined) removals.push({ kind: 'removeAnnotation', node, key });
  if (annotations[keys.failedRevision] !== undefined) removals.push({ kind: 'removeAnnotation', node, key: keys.failedRevision });
  if (annotations[keys.initialStateUnschedulable] !== undefined) removals.push({ kind: 'removeAnnotation', node, key: keys.initialStateUnschedulable });
  return removals;
}
