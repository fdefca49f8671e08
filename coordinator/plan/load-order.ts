/**
 * Drivers that share a node go in order. A DriverRollout may name the drivers it loads after
 * (`loadsAfter`: gpu after ofed, since nvidia_peermem links against the NIC stack and holds
 * ib_core, so an ofed reload under it fails DriverInUse). The pod-restart step's last checks
 * before it acts:
 *
 * - the dependency (ofed) is replaced (its out-of-date pod deleted, or its safe load released)
 *   only once no dependent (gpu) is loaded on the node, nor about to load: its agent's
 *   loaded-driver annotation gone (the agent removes it when it unloads on stop, UNLOAD_ON_STOP),
 *   and no pod of its DaemonSets running there past the safe-load gate (a Pending pod waits at it). The dependency's
 *   maintenance stops such a dependent itself, whatever the dependent's own state (its change
 *   seen or not, or none at all): it deletes the dependent's driver pods, with an Event under the
 *   dependent's reason. It leaves them to the dependent's own restart while that runs
 *   (cordon-required … pod-restart-required: that flow deletes them after its own checks), and
 *   holds, naming why, while a pod uses the dependent's device, while the dependent's upgrade is
 *   skipped on the node, or when no pod of the dependent's DriverRollout runs there to stop (its
 *   driver loaded by something no rollout manages there). Before it deletes them it marks the
 *   node (the dependent's stopped-for annotation);
 * - the dependent (gpu) stops at once (its old pod is deleted as usual), but its new driver is
 *   let load (its safe load released, in pod-restart-required or validation-required) only once
 *   no dependency upgrading there is still to load (each has passed pod-restart-required);
 * - a dependent so marked needs its upgrade (needs-upgrade.ts) whatever its state, and, nothing of
 *   it loaded, starts it past the gates that only hold new starts (stoppedForDependency;
 *   start-checks.ts, RESUME_CHECKS): it is already down, and its flow is what lets it load again, on its
 *   newest revision, after the dependency. Its start removes the mark.
 *
 * So the dependent must run with the safe-load gate (its init container) and unload on stop;
 * without them its new driver loads, or its old one stays loaded, regardless. Pure: other
 * drivers are seen through their state labels, safe-load and loaded-driver annotations, and pods.
 */
import { driverKeys, isUpgradeState, upgradeEventReason, UPGRADE_STATES, type DriverKeys, type UpgradeState } from '../../shared/keys.ts';
import { LOADED_DRIVER, NodeAnnotationProblem, parseNodeAnnotation } from '../../shared/node-annotations.ts';
import type { NodeAction } from './action.ts';
import { listPods, usesDevice } from './device-pods.ts';
import { isWaitingForSafeLoad } from './needs-upgrade.ts';
import type { DependentDriverSnapshot, PodSnapshot } from './snapshot.ts';
import type { NodeContext, Reason, StepContext } from './step.ts';

/** States from `from` to `to`, in the flow's order. */
const statesBetween = (from: UpgradeState, to: UpgradeState): ReadonlySet<UpgradeState> => new Set(UPGRADE_STATES.slice(UPGRADE_STATES.indexOf(from), UPGRADE_STATES.indexOf(to) + 1));

/** A driver's states from the decision to upgrade until its new driver loads. */
const TO_RELOAD = statesBetween('upgrade-required', 'pod-restart-required');
/** A driver's own restart under way: its flow deletes its driver pods, after its own checks, in pod-restart-required. */
const OWN_RESTART = statesBetween('cordon-required', 'pod-restart-required');

interface OtherDriver {
  readonly driver: string;
  readonly state: string;
}

/** The other drivers among `drivers` upgrading on the node and still to reload. */
function toReload(node: NodeContext, ctx: StepContext, drivers: readonly string[]): OtherDriver[] {
  const out: OtherDriver[] = [];
  for (const driver of drivers) {
    const state = node.view.labels[driverKeys(driver, ctx.policy.keyDomain).upgradeState] ?? '';
    if (isUpgradeState(state) && TO_RELOAD.has(state)) out.push({ driver, state });
  }
  return out;
}

const named = (drivers: readonly OtherDriver[]): string => drivers.map((d) => `${d.driver} (${d.state})`).join(', ');

/** A dependent still to stop before the dependency reloads: why it holds, and what this pass does about it. */
interface Stopping extends OtherDriver {
  /** Why a person must act, appended to the reason; null: it is stopping, or will, on its own or by this pass. */
  readonly blocked: string | null;
  readonly detail: string;
  readonly actions: readonly NodeAction[];
}

/**
 * Before this driver is replaced (its out-of-date pod deleted or its safe load released): the
 * drivers that load after it, stopped first. The reason names each one not yet stopped; the
 * actions stop those this maintenance stops itself. null: none is loaded or about to load.
 */
export function stopDependents(node: NodeContext, ctx: StepContext): { readonly reason: Reason; readonly actions: readonly NodeAction[] } | null {
  const stopping = ctx.dependents.flatMap((d) => {
    const s = dependentToStop(node, ctx, d);
    return s === null ? [] : [s];
  });
  if (stopping.length === 0) return null;
  const blocked = stopping.flatMap((s) => (s.blocked === null ? [] : [`${s.driver}: ${s.blocked}`]));
  const text = `waiting for ${named(stopping)} to stop first: ${stopping.length === 1 ? 'it loads' : 'they load'} after ${ctx.policy.driverName}${blocked.length === 0 ? '' : `; ${blocked.join('; ')}`}`;
  const detail = `${text} (${stopping.map((s) => `${s.driver}: ${s.detail}`).join('; ')})`;
  return { reason: { code: 'load-order', message: text, detail }, actions: stopping.flatMap((s) => s.actions) };
}

function dependentToStop(node: NodeContext, ctx: StepContext, dependent: DependentDriverSnapshot): Stopping | null {
  const keys = driverKeys(dependent.driver, ctx.policy.keyDomain);
  const annotations = node.view.annotations;
  const loaded = annotations[keys.driverLoaded] !== undefined;
  const holder = loadedBy(annotations[keys.driverLoaded], keys.driverLoaded);
  const gated = isWaitingForSafeLoad(annotations, keys);
  const pods = node.view.snapshot.pods.filter((p) => isPodOf(p, dependent));
  // To stop: the pod whose agent loaded the driver, and any other pod of the dependent whose
  // agent runs (phase Running: its init containers, the safe-load gate among them, are done) while
  // no safe load is asked, so it loads or is about to. A new pod is Pending while its init
  // container asks for a safe load and waits: the dependent's own flow lets it load, after this one.
  // Once stopped (its stopped-for mark, removed only when its own flow starts or lets it load), its
  // pods are the ones its DaemonSet made since, each held at the gate until that flow lets it load:
  // only a pod that loaded it is stopped again, so the stop is made once.
  const stopped = annotations[keys.stoppedFor] !== undefined;
  const live = pods.filter((p) => !p.deleting && (`${p.namespace}/${p.name}` === holder || (!gated && !stopped && p.phase === 'Running')));
  if (!loaded && live.length === 0) return null;
  const label = node.view.labels[keys.upgradeState];
  const state = label ?? 'no upgrade state';
  const hold = (blocked: string | null, detail: string, actions: readonly NodeAction[] = []): Stopping => ({ driver: dependent.driver, state, blocked, detail, actions });
  if (live.length === 0) {
    if (pods.length > 0) return hold(null, `its driver pod ${listPods(pods)} is stopping; its agent unloads it`);
    return hold('no driver pod of its DriverRollout runs on the node to stop it (unload it by hand)', 'its driver is loaded and no pod of its DaemonSets runs here');
  }
  if (label !== undefined && isUpgradeState(label) && OWN_RESTART.has(label)) return hold(null, `its own restart stops its driver pod ${listPods(live)}`);
  if (node.view.labels[keys.upgradeSkip] === 'true') return hold(`its upgrade is skipped here (label ${keys.upgradeSkip}=true)`, `its driver pod ${listPods(live)} is left alone`);
  const users = node.view.snapshot.pods.filter((p) => p.controllerKind !== 'DaemonSet' && usesDevice(p, dependent.devicePods));
  if (users.length > 0) return hold(`${listPods(users)} still ${users.length === 1 ? 'uses' : 'use'} its device`, `its driver pod ${listPods(live)} is not stopped under them`);
  return hold(null, `stopping its driver pod ${listPods(live)}`, stopActions(node, ctx, keys, dependent.driver, live));
}

/** The dependent's pods deleted (its DaemonSet recreates them at its newest revision, at the safe-load gate), and why, in the dependent's own Events. */
function stopActions(node: NodeContext, ctx: StepContext, keys: DriverKeys, driver: string, pods: readonly PodSnapshot[]): NodeAction[] {
  const name = node.view.snapshot.name;
  const dependency = ctx.policy.driverName;
  // The mark first: stored, it brings the dependent back through its own flow whatever its state then.
  const mark: NodeAction = { kind: 'setAnnotation', node: name, key: keys.stoppedFor, value: dependency };
  const deletes: NodeAction[] = pods.map((p) => ({ kind: 'deletePod', node: name, pod: { namespace: p.namespace, name: p.name, uid: p.uid } }));
  const message = `stopping driver pod ${listPods(pods)}: ${dependency}'s driver restarts on the node and ${driver} loads after it; the new pod waits at the safe-load gate (${keys.waitForSafeLoad}) until ${dependency} is loaded`;
  // The Event right after the mark's patch: sent once that patch is stored, even should leadership end before the deletions.
  return [...(node.view.annotations[keys.stoppedFor] === dependency ? [] : [mark]), { kind: 'emitEvent', node: name, type: 'Normal', reason: upgradeEventReason(driver), message }, ...deletes];
}

/** `<namespace>/<name>` of the pod whose agent loaded the driver (its loaded-driver annotation); null when absent or unreadable. */
function loadedBy(raw: string | undefined, key: string): string | null {
  const loaded = parseNodeAnnotation(LOADED_DRIVER, 'node', key, raw);
  return loaded === undefined || loaded instanceof NodeAnnotationProblem ? null : loaded.pod;
}

function isPodOf(pod: PodSnapshot, dependent: DependentDriverSnapshot): boolean {
  return pod.controllerKind === 'DaemonSet' && dependent.daemonSets.includes(`${pod.namespace}/${pod.controllerName ?? ''}`);
}

/** Why this driver's new driver may not load yet (its safe load released): a driver it loads after is still to reload on the node. null: none. */
export function waitingForDependenciesToLoad(node: NodeContext, ctx: StepContext): Reason | null {
  const pending = toReload(node, ctx, ctx.policy.loadsAfter);
  if (pending.length === 0) return null;
  const text = `waiting for ${named(pending)} to load first: ${ctx.policy.driverName} loads after ${pending.length === 1 ? 'it' : 'them'}`;
  return { code: 'load-order', message: text, detail: text };
}

/**
 * A dependency's maintenance stopped this driver on the node (its stopped-for mark, written
 * before its pods were deleted) and nothing of it is loaded there: its own upgrade starts past the
 * gates that hold new starts. The dependency named; null: not so stopped.
 */
export function stoppedForDependency(node: NodeContext, ctx: StepContext): string | null {
  const keys = ctx.policy.keys;
  const annotations = node.view.annotations;
  const by = annotations[keys.stoppedFor];
  return by === undefined || annotations[keys.driverLoaded] !== undefined ? null : by;
}
