/**
 * The restart-only path: when a node's driver pod is out of date but its DaemonSet's newest
 * template would load the very driver that is loaded (same version, modules, load plan and module
 * parameters: the fingerprints of shared/driver-identity.ts, read by the shell), the upgrade is only a pod restart. The node goes from
 * upgrade-required straight to pod-restart-required, without cordon, pod deletion, operand
 * pausing or drain, and to upgrade-done once the new pod is Ready; the agent takes its fast path.
 * It still takes a slot (the node's driver pod is not Ready meanwhile).
 */
import type { DriverKeys } from '../../shared/keys.ts';
import { NODE_ANNOTATIONS, parseNodeAnnotation } from '../../shared/node-annotations.ts';
import { isInUpgradeCycle, isUpgradeRequested, isWaitingForSafeLoad } from './needs-upgrade.ts';
import type { LoadedDriverSnapshot } from './snapshot.ts';
import type { NodeContext, StepContext } from './step.ts';

export const RESTART_ONLY_TEXT = 'restart only: driver unchanged';

/** This node's upgrade cycle was started as a restart only. */
export function isRestartOnlyCycle(annotations: Readonly<Record<string, string>>, keys: DriverKeys): boolean {
  return parseNodeAnnotation(NODE_ANNOTATIONS.restartOnly, 'node', keys.restartOnly, annotations[keys.restartOnly]) === true;
}

/**
 * The driver the agent says is loaded, when the newest template of every driver DaemonSet with a
 * pod on the node would load exactly that; null otherwise (a template that does not say plainly
 * what it loads, no annotation, or a different driver).
 */
export function unchangedDriver(node: NodeContext, ctx: StepContext): LoadedDriverSnapshot | null {
  const loaded = node.view.snapshot.loadedDriver ?? null;
  if (loaded === null || node.driver.pods.length === 0) return null;
  const same = node.driver.pods.every((p) => {
    const template = ctx.fingerprints.get(p.daemonSet) ?? null;
    return template !== null && template === loaded.fingerprint;
  });
  return same ? loaded : null;
}

/**
 * Whether a node in upgrade-required may start as a restart only: its one driver pod is out of
 * date, Ready, and the pod that published what is loaded (so the annotation is that pod's word,
 * not a stale one from before a reboot or a lagging write); the template loads the same driver;
 * and nothing else asks for the full path: no safe-load request (a pod starting afresh), no
 * upgrade-requested annotation, no earlier cycle still open (a failed or interrupted upgrade).
 */
export function canRestartOnly(node: NodeContext, ctx: StepContext): LoadedDriverSnapshot | null {
  const keys = ctx.policy.keys;
  const a = node.view.annotations;
  const driver = node.driver;
  const pod = driver.pods[0];
  if (driver.pods.length !== 1 || pod === undefined || driver.outOfDate.length !== 1 || driver.revisionUnknown || !pod.ready) return null;
  if (isWaitingForSafeLoad(a, keys) || isUpgradeRequested(a, keys) || isInUpgradeCycle(a, keys)) return null;
  const loaded = unchangedDriver(node, ctx);
  return loaded !== null && loaded.pod === `${pod.namespace}/${pod.name}` ? loaded : null;
}
