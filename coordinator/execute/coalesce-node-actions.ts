import type { NodeAction, NodeObjectAction, SetStateAction } from '../plan/action.ts';
import { isNodeObjectAction } from '../plan/node-patch.ts';
import { statePathMessage } from '../plan/state-label-message.ts';

/**
 * A node's action list as the executor runs it: every node-object action up to the next pod
 * action (delete, evict) becomes one merge patch, and the Events between them are sent after
 * that patch. One pass that moves a node through several states thus writes the Node once
 * (labels, annotations and cordon together, atomically) instead of once per state. Equivalent to
 * running the list in order: a merge patch applies its changes as if one after another, an Event
 * changes nothing the planner reads, and if the patch fails none of the transitions it carries
 * happened, so none of their Events is sent. Pod actions keep their place: a patch after a pod
 * action is not moved before it, nor past a check (requireSamePods). A start's cordon rides in
 * the patch that stores cordon-required; the steps planned past it follow the check.
 *
 * An Event that reports a state label ("Successfully updated node state label to [X]",
 * `reportsState`) is sent only for the state the patch stores: a state entered and left within
 * one patch (upgrade-required on the way to cordon-required, uncordon-required on the way to
 * upgrade-done) is never stored, so saying it was would be untrue, and it would cost a write. The
 * Event of the state stored names instead every state the patch passed, in order
 * (statePathMessage): no write more, and every state a node went through is on record.
 */
export function coalesceNodeActions(actions: readonly NodeAction[]): ActionGroup[] {
  const groups: ActionGroup[] = [];
  let patch: NodeObjectAction[] = [];
  let events: NodeAction[] = [];
  const flush = (): void => {
    if (patch.length > 0) groups.push(patch);
    const changes = patch.filter((a): a is SetStateAction => a.kind === 'setState');
    const stored = changes.at(-1)?.to;
    for (const e of events) {
      if (e.kind !== 'emitEvent' || e.reportsState === undefined || stored === undefined) groups.push(e);
      else if (e.reportsState === stored) groups.push(changes.length > 1 ? { ...e, message: statePathMessage(changes) ?? e.message } : e);
    }
    patch = [];
    events = [];
  };
  for (const action of actions) {
    if (isNodeObjectAction(action)) patch.push(action);
    else if (action.kind === 'emitEvent') events.push(action);
    else {
      flush();
      groups.push(action);
    }
  }
  flush();
  return groups;
}

/** One merge patch (node-object actions) or one other action. */
export type ActionGroup = readonly NodeObjectAction[] | NodeAction;

export function isPatch(group: ActionGroup): group is readonly NodeObjectAction[] {
  return Array.isArray(group);
}
