/**
 * Drivers that share a node go in order. A DriverRollout may name the drivers it loads after
 * (`loadsAfter`: gpu after ofed, since nvidia_peermem links against the NIC stack and holds
 * ib_core, so an ofed reload under it fails DriverInUse). On a node where both are upgrading (a
 * shared maintenance: each in upgrade-required … pod-restart-required), the driver restart of
 * each waits for the other, as the pod-restart step's last checks before it acts:
 *
 * - the dependency (ofed) deletes its out-of-date pod, or releases its safe load, only once every
 *   dependent (gpu) upgrading there has stopped: its agent's loaded-driver annotation is gone
 *   (the agent removes it when it unloads on stop, UNLOAD_ON_STOP);
 * - the dependent (gpu) stops at once (its old pod is deleted as usual), but its new driver is
 *   let load (its safe load released) only once no dependency upgrading there is still to load
 *   (each has passed pod-restart-required).
 *
 * So the dependent must run with the safe-load gate (its init container) and unload on stop;
 * without them its new driver loads, or its old one stays loaded, regardless. A dependent that
 * is not upgrading on the node (done, unknown) holds nothing: only what one maintenance changes is
 * ordered. Pure: other drivers are seen through their state labels and the agents' annotations.
 */
import { driverKeys, isUpgradeState, UPGRADE_STATES, type UpgradeState } from '../../shared/keys.ts';
import type { NodeContext, Reason, StepContext } from './step.ts';

/** A driver's states from the decision to upgrade until its new driver loads (upgrade-required … pod-restart-required, in the flow's order). */
const TO_RELOAD: ReadonlySet<UpgradeState> = new Set(UPGRADE_STATES.slice(UPGRADE_STATES.indexOf('upgrade-required'), UPGRADE_STATES.indexOf('pod-restart-required') + 1));

interface OtherDriver {
  readonly driver: string;
  readonly state: UpgradeState;
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

/**
 * Why this driver may not be replaced yet (its out-of-date pod deleted or its safe load
 * released): a driver that loads after it is upgrading on the node and still loaded. null: none.
 */
export function waitingForDependentsToStop(node: NodeContext, ctx: StepContext): Reason | null {
  const loaded = toReload(node, ctx, ctx.dependents).filter((d) => node.view.annotations[driverKeys(d.driver, ctx.policy.keyDomain).driverLoaded] !== undefined);
  if (loaded.length === 0) return null;
  const text = `waiting for ${named(loaded)} to stop first: ${loaded.length === 1 ? 'it loads' : 'they load'} after ${ctx.policy.driverName}`;
  return { code: 'load-order', message: text, detail: text };
}

/** Why this driver's new driver may not load yet (its safe load released): a driver it loads after is still to reload on the node. null: none. */
export function waitingForDependenciesToLoad(node: NodeContext, ctx: StepContext): Reason | null {
  const pending = toReload(node, ctx, ctx.policy.loadsAfter);
  if (pending.length === 0) return null;
  const text = `waiting for ${named(pending)} to load first: ${ctx.policy.driverName} loads after ${pending.length === 1 ? 'it' : 'them'}`;
  return { code: 'load-order', message: text, detail: text };
}
