/**
 * Stopping the device's clients before the driver is replaced, and bringing them back, as
 * NVIDIA's k8s-driver-manager does: operand DaemonSets (device plugin, GFD, DCGM, MIG manager)
 * are paused through their node labels (`nvidia.com/gpu.deploy.<operand>=paused-for-driver-upgrade`;
 * the DaemonSet controller then removes their pods from the node), and other DaemonSet pods that
 * use the device are deleted. The labels' previous values live in an annotation (written before
 * the labels), so a restarted coordinator restores exactly what it paused.
 */
import { OPERAND_PAUSED_VALUE } from '../../shared/keys.ts';
import { COMMA_LIST, LABEL_VALUES, NodeAnnotationProblem, parseNodeAnnotation } from '../../shared/node-annotations.ts';
import { matchesSelector } from '../policy/label-selector.ts';
import type { NodeAction } from './action.ts';
import { isTerminal, listPods, usesDevice } from './device-pods.ts';
import type { PodSnapshot } from './snapshot.ts';
import { readUnixSeconds } from './node-view.ts';
import { fail, readTimer, timeoutText, wait, type NodeContext, type StepContext, type StepResult } from './step.ts';

/**
 * The operand labels we paused and their previous values ({} when none are recorded), or what is
 * wrong with the record: an annotation that is not a JSON object of strings is never read as
 * "nothing paused", since the labels it names would then stay paused and nothing would say so.
 */
export function pausedOperands(
  annotations: Readonly<Record<string, string>>,
  key: string,
): { readonly labels: Readonly<Record<string, string>> } | { readonly problem: string } {
  const read = parseNodeAnnotation(LABEL_VALUES, 'node', key, annotations[key]);
  if (read instanceof NodeAnnotationProblem) return { problem: `annotation ${key} ${read.what}` };
  return { labels: read ?? {} };
}

/**
 * Before the driver pod is replaced: pause the operand labels present, delete the other
 * DaemonSet pods that use the device, and wait (clients.timeoutSeconds, then upgrade-failed)
 * until none of them is on the node. null when nothing is left to stop.
 * Only the clients there when the step began are deleted and waited for: their DaemonSet recreates
 * them at once (DaemonSet pods tolerate the cordon), and the coordinator is stateless, so "delete
 * once" lives on the node: the first pass records the step's start (operandPauseStartTime) and the
 * pods it stops (clientsStopped). Replacements are left alone (recreatedClientWarnings says so once
 * per DaemonSet).
 */
export function stopDeviceClients(node: NodeContext, ctx: StepContext): StepResult | null {
  const keys = ctx.policy.keys;
  const name = node.view.snapshot.name;
  const settings = ctx.policy.clients;
  const labels = node.view.labels;
  const toPause = settings.operandLabels.filter((k) => labels[k] !== undefined && labels[k] !== OPERAND_PAUSED_VALUE);
  const pausing: NodeAction[] = [];
  if (toPause.length > 0) {
    const recorded = pausedOperands(node.view.annotations, keys.pausedOperands);
    // Writing over an unreadable record would lose the values of the labels it paused.
    if ('problem' in recorded) return fail(node, ctx, `node ${name}: ${recorded.problem}; set the paused operand labels back by hand, then remove the annotation`);
    const previous = { ...recorded.labels, ...Object.fromEntries(toPause.map((k) => [k, labels[k] ?? ''])) };
    pausing.push({ kind: 'setAnnotation', node: name, key: keys.pausedOperands, value: JSON.stringify(previous) });
    for (const key of toPause) pausing.push({ kind: 'setLabel', node: name, key, value: OPERAND_PAUSED_VALUE });
  }
  const paused = new Set(settings.operandLabels.filter((k) => labels[k] !== undefined));
  const operands = node.view.snapshot.pods.filter((p) => !isTerminal(p) && p.nodeLabelKeys.some((k) => paused.has(k)));
  const timer = readTimer(node, ctx, keys.operandPauseStartTime, settings.timeoutSeconds);
  // First pass (no start recorded yet): nothing was deleted, so every client there is one to stop.
  const firstPass = timer.actions.length > 0;
  const stopped = stoppedClients(node.view.annotations, keys.clientsStopped);
  const clients = node.view.snapshot.pods.filter((p) => !operands.includes(p) && isDeviceClient(p, ctx) && (firstPass || !isReplacement(p, timer.start, stopped)));
  if (pausing.length === 0 && operands.length === 0 && clients.length === 0) return null;
  const left = [...operands, ...clients];
  if (timer.expired) return fail(node, ctx, `device clients still on the node ${settings.timeoutSeconds}s after they were stopped: ${listPods(left)}`);
  const record: NodeAction[] = firstPass && clients.length > 0 ? [{ kind: 'setAnnotation', node: name, key: keys.clientsStopped, value: clients.map(podKey).join(',') }] : [];
  const deletes: NodeAction[] = clients.filter((p) => !p.deleting).map((p) => ({ kind: 'deletePod', node: name, pod: { namespace: p.namespace, name: p.name, uid: p.uid } }));
  const what = left.length > 0 ? `waiting for device clients to leave: ${listPods(left)}` : `pausing operands: ${toPause.join(', ')}`;
  return wait(
    { code: 'waiting-for-clients', message: `${what} (${timeoutText(settings.timeoutSeconds)})`, detail: `${what} ${timer.progress}` },
    // The record before the deletions: a coordinator killed in between still knows which pods were the originals.
    [...pausing, ...timer.actions, ...record, ...deletes],
    timer.deadline,
  );
}

/**
 * One Warning Event per DaemonSet whose client pod came back after the step began (recorded in
 * the clientsRecreated annotation, written with the Events, so later passes stay quiet). Such a
 * pod is neither deleted again nor waited for; should it open the device, the agent reports
 * DriverInUse and the node fails after podRestart.failAfterSeconds. [] when nothing is new.
 */
export function recreatedClientWarnings(node: NodeContext, ctx: StepContext): NodeAction[] {
  const keys = ctx.policy.keys;
  const started = readUnixSeconds(node.view.annotations, keys.operandPauseStartTime);
  if (started === null) return [];
  const warned = commaList(node.view.annotations, keys.clientsRecreated);
  const stopped = stoppedClients(node.view.annotations, keys.clientsStopped);
  const fresh = new Map<string, PodSnapshot>();
  for (const pod of node.view.snapshot.pods) {
    const daemonSet = `${pod.namespace}/${pod.controllerName ?? ''}`;
    if (isDeviceClient(pod, ctx) && isReplacement(pod, started, stopped) && !warned.has(daemonSet) && !fresh.has(daemonSet)) fresh.set(daemonSet, pod);
  }
  if (fresh.size === 0) return [];
  const name = node.view.snapshot.name;
  const actions: NodeAction[] = [{ kind: 'setAnnotation', node: name, key: keys.clientsRecreated, value: [...warned, ...fresh.keys()].join(',') }];
  for (const [daemonSet, pod] of fresh) {
    const message =
      `DaemonSet ${daemonSet} recreated its device client ${pod.namespace}/${pod.name} after it was stopped for the driver restart; ` +
      `it is not deleted again. Pause it with upgradePolicy.clients.operandLabels (a node label its nodeSelector requires): ` +
      `if it opens the device, the agent reports DriverInUse and the node fails after podRestart.failAfterSeconds`;
    actions.push({ kind: 'emitEvent', node: name, type: 'Warning', reason: ctx.policy.eventReason, message });
  }
  return actions;
}

/** A DaemonSet pod (pod deletion leaves those alone) that uses the device or matches clients.podSelector. */
function isDeviceClient(pod: PodSnapshot, ctx: StepContext): boolean {
  if (isTerminal(pod) || pod.controllerKind !== 'DaemonSet') return false;
  const selector = ctx.policy.clients.podSelector;
  return usesDevice(pod, ctx.policy.devicePods) || (selector !== null && matchesSelector(selector, pod.labels));
}

/**
 * A client pod that came after the step began (`start`, ms): not one the first pass stopped, and
 * created in the step's first second or later. Both times count in whole seconds, as the API and
 * the annotation store them; a pod there before the step but created in its first second is told
 * apart by the record (`stopped`, null on nodes stepped by a coordinator that kept none), and one
 * the first pass did not see yet counts as a replacement: the loop this prevents recreates pods
 * several times a second. Unknown creation time: older.
 */
function isReplacement(pod: PodSnapshot, start: number, stopped: ReadonlySet<string> | null): boolean {
  if (stopped?.has(podKey(pod)) === true) return false;
  if (pod.createdAt === undefined || pod.createdAt === null) return false;
  return Math.floor(pod.createdAt / 1000) >= Math.floor(start / 1000);
}

/** The client pods the step's first pass stopped; null when none are recorded. */
function stoppedClients(annotations: Readonly<Record<string, string>>, key: string): ReadonlySet<string> | null {
  return annotations[key] === undefined ? null : commaList(annotations, key);
}

/**
 * A comma-separated annotation's entries; empty when absent, empty, or not a list of
 * `<namespace>/<name>`: a lost clientsRecreated record sends its Warnings again (and is rewritten),
 * a lost clientsStopped record reads as no pod stopped (creation times decide).
 */
function commaList(annotations: Readonly<Record<string, string>>, key: string): ReadonlySet<string> {
  const read = parseNodeAnnotation(COMMA_LIST, 'node', key, annotations[key]);
  return read instanceof NodeAnnotationProblem || read === undefined ? new Set() : read;
}

function podKey(pod: PodSnapshot): string {
  return `${pod.namespace}/${pod.name}`;
}

/**
 * Once the new driver is Ready: every label we paused gets its previous value back (unless
 * someone changed it meanwhile), then the record goes. An unreadable record restores nothing (no
 * previous value is guessed): a Warning Event names the node, the record as it was and the
 * labels still paused, and the record goes, so the Event is sent once.
 */
export function restoreDeviceClients(node: NodeContext, ctx: StepContext): NodeAction[] {
  const key = ctx.policy.keys.pausedOperands;
  if (node.view.annotations[key] === undefined) return [];
  const name = node.view.snapshot.name;
  const recorded = pausedOperands(node.view.annotations, key);
  if ('problem' in recorded) {
    const stillPaused = Object.keys(node.view.labels).filter((label) => node.view.labels[label] === OPERAND_PAUSED_VALUE).sort();
    const labels = stillPaused.length > 0 ? stillPaused.join(', ') : 'none';
    const message = `node ${name}: ${recorded.problem}; operand labels not restored (still ${OPERAND_PAUSED_VALUE}: ${labels}): set them back by hand`;
    return [
      { kind: 'removeAnnotation', node: name, key },
      { kind: 'emitEvent', node: name, type: 'Warning', reason: ctx.policy.eventReason, message },
    ];
  }
  const actions: NodeAction[] = Object.entries(recorded.labels)
    .filter(([label]) => node.view.labels[label] === OPERAND_PAUSED_VALUE)
    .map(([label, value]) => ({ kind: 'setLabel', node: name, key: label, value }));
  actions.push({ kind: 'removeAnnotation', node: name, key });
  return actions;
}
