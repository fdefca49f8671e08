import { matchesSelector } from '../../policy/label-selector.ts';
import { isTerminal, listPods } from '../device-pods.ts';
import { advance, fail, readTimer, timeoutText, wait, type StateHandler } from '../step.ts';

/**
 * Validator pods (validation.podSelector) on the node must all be Ready, at least one of them.
 * Start time kept in the validation-start-time annotation; on timeout (configurable, 0 = forever;
 * upstream hard-codes 600 s) → upgrade-failed. "" skips validation.
 */
export const handleValidation: StateHandler = (node, ctx) => {
  const { podSelector, timeoutSeconds } = ctx.policy.validation;
  if (podSelector === null) return advance('uncordon-required', true);
  const validators = node.view.snapshot.pods.filter((p) => !isTerminal(p) && !p.deleting && matchesSelector(podSelector, p.labels));
  const notReady = validators.filter((p) => !p.ready);
  if (validators.length > 0 && notReady.length === 0) return advance('uncordon-required', true);
  const timer = readTimer(node, ctx, ctx.policy.keys.validationStartTime, timeoutSeconds);
  const missing = validators.length === 0 ? `no validator pod (${podSelector.text}) on the node` : `validator pods not Ready: ${listPods(notReady)}`;
  if (timer.expired) return fail(node, ctx, `validation timed out after ${timeoutSeconds}s: ${missing}`);
  return wait(
    {
      code: 'waiting-for-validation',
      message: `waiting for validator pods (${podSelector.text}) to be Ready, ${timeoutText(timeoutSeconds)}`,
      detail: `${missing} ${timer.progress}`,
    },
    timer.actions,
    timer.deadline,
  );
};
