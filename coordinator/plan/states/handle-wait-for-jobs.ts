import { matchesSelector } from '../../policy/label-selector.ts';
import { isTerminal, listPods } from '../device-pods.ts';
import { advance, readTimer, skip, timeoutText, wait, type StateHandler } from '../step.ts';

/**
 * Wait until the pods matching waitForCompletion.podSelector on the node have finished. On
 * timeout the upgrade moves on (as upstream); 0 waits forever; "" waits on nothing.
 */
export const handleWaitForJobs: StateHandler = (node, ctx) => {
  const { podSelector, timeoutSeconds } = ctx.policy.waitForCompletion;
  if (podSelector === null) return skip('pod-deletion-required', 'no waitForCompletion.podSelector');
  const jobs = node.view.snapshot.pods.filter((p) => !isTerminal(p) && matchesSelector(podSelector, p.labels));
  if (jobs.length === 0) return skip('pod-deletion-required', 'no job pods to wait for');
  const timer = readTimer(node, ctx, ctx.policy.keys.waitForPodCompletionStartTime, timeoutSeconds);
  const listed = listPods(jobs);
  if (timer.expired) {
    return advance('pod-deletion-required', true, [], `gave up waiting for job pods after ${timeoutSeconds}s: ${listed}`);
  }
  return wait(
    {
      code: 'waiting-for-jobs',
      message: `waiting for job pods: ${listed} (${timeoutText(timeoutSeconds)})`,
      detail: `waiting for job pods: ${listed} ${timer.progress}`,
    },
    timer.actions,
    timer.deadline,
  );
};
