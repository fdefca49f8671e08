import { matchesSelector } from '../../policy/label-selector.ts';
import type { NodeAction } from '../action.ts';
import { isTerminal, listPods } from '../device-pods.ts';
import { isWaitingForSafeLoad } from '../needs-upgrade.ts';
import type { PodSnapshot } from '../snapshot.ts';
import { advance, fail, readTimer, skip, timeoutText, wait, type NodeContext, type StateHandler, type StepContext } from '../step.ts';

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
 * upstream hard-codes 600 s) → upgrade-failed. "" skips validation.
 */
export const handleValidation: StateHandler = (node, ctx) => {
  const { podSelector, timeoutSeconds } = ctx.policy.validation;
  const keys = ctx.policy.keys;
  // A driver pod restarted during validation (its init container re-set the safe-load
  // annotation and blocks): let it load, as upstream's ProcessValidationRequiredNodes does.
  const unblock: NodeAction[] = isWaitingForSafeLoad(node.view.annotations, keys)
    ? [{ kind: 'clearSafeLoad', node: node.view.snapshot.name, key: keys.waitForSafeLoad }]
    : [];
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
