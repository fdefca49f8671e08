import { matchesSelector } from '../../policy/label-selector.ts';
import type { NodeAction } from '../action.ts';
import { isTerminal, listPods } from '../device-pods.ts';
import { waitingForDependenciesToLoad } from '../load-order.ts';
import { isWaitingForSafeLoad } from '../needs-upgrade.ts';
import type { PodSnapshot } from '../snapshot.ts';
import { advance, fail, readTimer, skip, timeoutText, wait, type NodeContext, type Reason, type StateHandler, type StepContext, type StepResult } from '../step.ts';

/** The validator pods on the node and which of them are not Ready; `passed` when validation is off or all of at least one are Ready. */
export function checkValidators(node: NodeContext, ctx: StepContext): { passed: boolean; validators: readonly PodSnapshot[]; notReady: readonly PodSnapshot[] } {
  const podSelector = ctx.policy.validation.podSelector;
  if (podSelector === null) return { passed: true, validators: [], notReady: [] };
  const validators = node.view.snapshot.pods.filter((p) => !isTerminal(p) && !p.deleting && matchesSelector(podSelector, p.labels));
  const notReady = validators.filter((p) => !p.ready);
  return { passed: validators.length > 0 && notReady.length === 0, validators, notReady };
}

/**
 * Validator pods (validation.podSelector) on the node must all be Ready, at least one of them.
 * Start time kept in the validation-start-time annotation; on timeout (configurable, 0 = forever;
 * upstream hard-codes 600 s) → upgrade-failed. "" skips validation. A driver pod restarted here
 * asks for a safe load again: released, unless a driver this one loads after is still to load on
 * the node (load-order.ts); then the node waits, naming it, within the same timeout.
 */
export const handleValidation: StateHandler = (node, ctx) => {
  const { podSelector, timeoutSeconds } = ctx.policy.validation;
  const keys = ctx.policy.keys;
  const asked = isWaitingForSafeLoad(node.view.annotations, keys);
  // A driver pod restarted during validation (its init container re-set the safe-load
  // annotation and blocks): let it load, as upstream's ProcessValidationRequiredNodes does, but
  // only once the drivers it loads after are loaded (load-order.ts): a dependency's maintenance
  // may be what stopped it. Its stopped-for mark goes with the release: it loads again here.
  const order = asked ? waitingForDependenciesToLoad(node, ctx) : null;
  if (order !== null) return holdForLoadOrder(node, ctx, order);
  const unblock: NodeAction[] = asked ? [{ kind: 'clearSafeLoad', node: node.view.snapshot.name, key: keys.waitForSafeLoad }, ...stoppedForRemoval(node, ctx)] : [];
  const { passed, validators, notReady } = checkValidators(node, ctx);
  if (podSelector === null && unblock.length === 0) return skip('uncordon-required', 'no validation.podSelector');
  if (passed || podSelector === null) return advance('uncordon-required', true, unblock);
  const timer = readTimer(node, ctx, keys.validationStartTime, timeoutSeconds);
  const missing = validators.length === 0 ? `no validator pod (${podSelector.text}) on the node` : `validator pods not Ready: ${listPods(notReady)}`;
  if (timer.expired) return fail(node, ctx, `validation timed out after ${timeoutSeconds}s: ${missing}`, unblock);
  return wait(
    {
      code: 'waiting-for-validation',
      message: `${missing} (${timeoutText(timeoutSeconds)})`,
      detail: `${missing} ${timer.progress}`,
    },
    [...unblock, ...timer.actions],
    timer.deadline,
  );
};

/** The new driver waits at the safe-load gate for a dependency still to load, within the validation timeout. */
function holdForLoadOrder(node: NodeContext, ctx: StepContext, order: Reason): StepResult {
  const { timeoutSeconds } = ctx.policy.validation;
  const timer = readTimer(node, ctx, ctx.policy.keys.validationStartTime, timeoutSeconds);
  if (timer.expired) return fail(node, ctx, `validation timed out after ${timeoutSeconds}s: ${order.message}`);
  return wait({ ...order, detail: `${order.detail} ${timer.progress}` }, timer.actions, timer.deadline);
}

function stoppedForRemoval(node: NodeContext, ctx: StepContext): NodeAction[] {
  const key = ctx.policy.keys.stoppedFor;
  return node.view.annotations[key] === undefined ? [] : [{ kind: 'removeAnnotation', node: node.view.snapshot.name, key }];
}
