/**
 * A node found schedulable in a step that needs it cordoned: someone uncordoned it mid-upgrade
 * (an admin's `kubectl uncordon`, another operator, a second release of the coordinator). Pods
 * may have landed on it since, so it goes back to cordon-required: cordoned again (this driver's
 * hold, cordon-holders.ts) and, in the same pass behind the cordon's check, through the job wait,
 * pod deletion and drain again before any driver restart. A Warning Event names who was expected
 * to hold the cordon. An admin's cordon from before the upgrade that was lifted is the admin's
 * word: the node is now cordoned by this driver, and uncordoned by it when its upgrade is done.
 *
 * Checked from the step after the cordon (wait-for-jobs-required) up to validation-required;
 * uncordon-required only lets go of the cordon, and a restart-only upgrade never cordons.
 */
import { cordonHolderOf, CORDON_HOLDERS_ANNOTATION, type UpgradeState } from '../../shared/keys.ts';
import type { NodeAction } from './action.ts';
import { cordonHolders } from './cordon-holders.ts';
import { isRestartOnlyCycle } from './restart-only.ts';
import type { NodeContext, StepContext, StepResult } from './step.ts';

/** The steps that need the node cordoned: between the cordon and the validation. */
export const CORDONED_STATES: ReadonlySet<UpgradeState> = new Set<UpgradeState>([
  'wait-for-jobs-required',
  'pod-deletion-required',
  'drain-required',
  'pod-restart-required',
  'validation-required',
]);

/** The way back to cordon-required of a node found schedulable in a step that needs it cordoned; null when it is cordoned (or needs not be). */
export function cordonLost(node: NodeContext, ctx: StepContext): StepResult | null {
  const view = node.view;
  if (view.unschedulable || !CORDONED_STATES.has(view.state)) return null;
  const keys = ctx.policy.keys;
  const a = view.annotations;
  if (isRestartOnlyCycle(a, keys)) return null;
  const name = view.snapshot.name;
  const actions: NodeAction[] = [];
  const expected = cordonHolders(a).map((h) => `${h} (${CORDON_HOLDERS_ANNOTATION})`);
  if (a[keys.initialStateUnschedulable] !== undefined) {
    expected.push(`an admin (cordoned before the upgrade, ${keys.initialStateUnschedulable})`);
    actions.push({ kind: 'removeAnnotation', node: name, key: keys.initialStateUnschedulable });
  }
  if (expected.length === 0) expected.push(cordonHolderOf(keys));
  const warning = `found schedulable in ${view.state}, its cordon expected to be held by ${expected.join(', ')}: uncordoned from outside; cordoned again, its workloads are evicted again before the driver restarts`;
  return { kind: 'advance', to: 'cordon-required', actions, chain: true, warning };
}
