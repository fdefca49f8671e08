/**
 * The text of the Event that reports a stored state label (reason `<DRIVER>DriverUpgrade`). One
 * write may move a node through several states (a state whose step is off or has nothing to do
 * is passed in the same patch, never stored); its Event then names every state the write passed,
 * in order, each skipped one with why, so `kubectl get events | grep GPUDriverUpgrade`, audits
 * and runbooks see every state a node went through without a write per state.
 */
import type { UpgradeState } from '../../shared/keys.ts';
import type { SetStateAction } from './action.ts';

const stateLabelMessages = new Map<UpgradeState, string>();

/** "Successfully updated node state label to [X]", the GPU Operator's text; one string per state for the thousands of Events a pass may emit. */
export function stateLabelMessage(state: UpgradeState): string {
  let message = stateLabelMessages.get(state);
  if (message === undefined) stateLabelMessages.set(state, (message = `Successfully updated node state label to [${state}]`));
  return message;
}

/**
 * The message for one write's state changes, in order: the GPU Operator's text for a single
 * change; for several, that text followed by the path from the state stored before the write,
 * e.g. "Successfully updated node state label to [pod-restart-required]: cordon-required →
 * wait-for-jobs-required (no job pods to wait for) → pod-deletion-required (no device pods to
 * delete) → pod-restart-required".
 */
export function statePathMessage(changes: readonly Pick<SetStateAction, 'from' | 'to' | 'skipped'>[]): string | undefined {
  const last = changes.at(-1);
  const first = changes[0];
  if (last === undefined || first === undefined) return undefined;
  if (changes.length === 1) return stateLabelMessage(last.to);
  const steps = changes.map((change, i) => {
    const leaving = changes[i + 1];
    return leaving?.skipped === undefined ? change.to : `${change.to} (${leaving.skipped})`;
  });
  const start = first.skipped === undefined ? first.from : `${first.from} (${first.skipped})`;
  return `${stateLabelMessage(last.to)}: ${[start, ...steps].join(' → ')}`;
}
