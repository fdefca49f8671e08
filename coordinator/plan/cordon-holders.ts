/**
 * Who holds a node's cordon (shared/keys.ts CORDON_HOLDERS_ANNOTATION), and what a cordon or an
 * uncordon of one holder makes of a node as it is read. One rule for the planner's view of a
 * pass and for the executor, which applies it to the node as the API server last gave it and
 * writes the result with that node's resourceVersion (a conflict re-reads and applies it again):
 *
 * - cordon by H: a schedulable node is cordoned, held by H alone or with the holders already
 *   listed; a node cordoned and held by others gets H added; a node cordoned and held by no one
 *   (an admin's, kured's, a maintenance operator's cordon) is left as it is: H does not take it
 *   over, so H never undoes it.
 * - uncordon by H: H leaves the holders; the node is uncordoned only when H was listed and no
 *   holder is left. A node with no holders annotation at all was cordoned before holders were
 *   recorded (an older release): the planner's own rules decide (initial-state annotation, other
 *   drivers' states), as they did then.
 */
import { CORDON_HOLDERS_ANNOTATION } from '../../shared/keys.ts';
import { CORDON_HOLDERS, NodeAnnotationProblem, parseNodeAnnotation } from '../../shared/node-annotations.ts';

/** What the cordon rule reads and writes of a node. */
export interface CordonFacts {
  readonly unschedulable: boolean;
  /** CORDON_HOLDERS_ANNOTATION's value; undefined when absent. */
  readonly holders: string | undefined;
}

/** A cordon or an uncordon on behalf of one holder. */
export interface CordonChange {
  readonly kind: 'cordon' | 'uncordon';
  readonly holder: string;
}

/** The holders listed (sorted); empty when none or the annotation is absent. */
export function cordonHolders(annotations: Readonly<Record<string, string>>): readonly string[] {
  return parseHolders(annotations[CORDON_HOLDERS_ANNOTATION]);
}

/** Whether `holder` is listed among the node's cordon holders. */
export function holdsCordon(annotations: Readonly<Record<string, string>>, holder: string): boolean {
  return cordonHolders(annotations).includes(holder);
}

/** The node after `change`, by the rule above (the holders' value undefined: absent). */
export function applyCordonChange(node: CordonFacts, change: CordonChange): CordonFacts {
  const holders = parseHolders(node.holders);
  if (change.kind === 'cordon') {
    if (node.unschedulable && holders.length === 0) return node;
    return { unschedulable: true, holders: render(withHolder(holders, change.holder)) };
  }
  if (node.holders === undefined) return { unschedulable: false, holders: undefined };
  if (!holders.includes(change.holder)) return node;
  const left = holders.filter((h) => h !== change.holder);
  return { unschedulable: left.length === 0 ? false : node.unschedulable, holders: left.length === 0 ? undefined : render(left) };
}

function parseHolders(raw: string | undefined): readonly string[] {
  const read = parseNodeAnnotation(CORDON_HOLDERS, 'node', CORDON_HOLDERS_ANNOTATION, raw);
  // Every text reads as holders (CORDON_HOLDERS): absent is the only other answer.
  return read instanceof NodeAnnotationProblem || read === undefined ? [] : read;
}

function withHolder(holders: readonly string[], holder: string): readonly string[] {
  return holders.includes(holder) ? holders : [...holders, holder].sort();
}

function render(holders: readonly string[]): string {
  return holders.join(',');
}
