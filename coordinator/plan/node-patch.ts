/**
 * Turns consecutive node-object actions into one JSON merge patch of the Node, so an executor can
 * apply a node's metadata changes atomically (one write, one resourceVersion).
 */
import { CORDON_HOLDERS_ANNOTATION } from '../../shared/keys.ts';
import type { NodeAction, NodeObjectAction } from './action.ts';
import { applyCordonChange, type CordonFacts } from './cordon-holders.ts';

export interface NodeMergePatch {
  metadata?: { labels?: Record<string, string | null>; annotations?: Record<string, string | null>; resourceVersion?: string };
  spec?: { unschedulable: boolean };
}

/** The node as read, that a patch with a cordon change is made against (its resourceVersion goes into the patch). */
export interface NodeAsRead extends CordonFacts {
  readonly name: string;
  readonly resourceVersion: string;
}

/** Whether the patch changes the cordon: it must then be made against the node as read (nodePatchOf's `read`). */
export function changesCordon(actions: readonly NodeObjectAction[]): boolean {
  return actions.some((a) => a.kind === 'cordon' || a.kind === 'uncordon');
}

export function isNodeObjectAction(action: NodeAction): action is NodeObjectAction {
  switch (action.kind) {
    case 'setState':
    case 'cordon':
    case 'uncordon':
    case 'setAnnotation':
    case 'removeAnnotation':
    case 'setLabel':
    case 'clearSafeLoad':
      return true;
    default:
      return false;
  }
}

/**
 * Later actions win over earlier ones on the same key, as if applied one after another. A cordon
 * or an uncordon is left out: it is written only against the node as read (nodePatchAgainst).
 */
export function nodePatchOf(actions: readonly NodeObjectAction[]): NodeMergePatch {
  const labels: Record<string, string | null> = {};
  const annotations: Record<string, string | null> = {};
  for (const a of actions) {
    switch (a.kind) {
      case 'setState':
        labels[a.labelKey] = a.to;
        break;
      case 'setAnnotation':
        annotations[a.key] = a.value;
        break;
      case 'setLabel':
        labels[a.key] = a.value;
        break;
      case 'removeAnnotation':
      case 'clearSafeLoad':
        annotations[a.key] = null;
        break;
      case 'cordon':
      case 'uncordon':
        break;
    }
  }
  const patch: NodeMergePatch = {};
  const metadata: NonNullable<NodeMergePatch['metadata']> = {};
  if (Object.keys(labels).length > 0) metadata.labels = labels;
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  if (metadata.labels !== undefined || metadata.annotations !== undefined) patch.metadata = metadata;
  return patch;
}

/**
 * nodePatchOf with the cordon changes made against `read`, the node as last read
 * (cordon-holders.ts): the patch carries the cordon and the holders only where they change, and
 * `read`'s resourceVersion, so the API server refuses it (409) if the node changed since.
 */
export function nodePatchAgainst(actions: readonly NodeObjectAction[], read: NodeAsRead): NodeMergePatch {
  const patch = nodePatchOf(actions);
  const cordon = cordonAfter(actions, read);
  if (cordon === undefined) return patch;
  const metadata = { resourceVersion: read.resourceVersion, ...patch.metadata };
  if (cordon.holders !== read.holders) metadata.annotations = { ...metadata.annotations, [CORDON_HOLDERS_ANNOTATION]: cordon.holders ?? null };
  return cordon.unschedulable === read.unschedulable ? { metadata } : { metadata, spec: { unschedulable: cordon.unschedulable } };
}

/** The node's cordon after the actions' cordon changes, made one after another against `read`; undefined when there is none. */
function cordonAfter(actions: readonly NodeObjectAction[], read: CordonFacts): CordonFacts | undefined {
  let cordon: CordonFacts | undefined;
  for (const a of actions) if (a.kind === 'cordon' || a.kind === 'uncordon') cordon = applyCordonChange(cordon ?? read, a);
  return cordon;
}

/** Splits a node's action list into runs: each run is either node-object actions (one patch) or a single other action. */
export function groupNodeActions(actions: readonly NodeAction[]): (readonly NodeObjectAction[] | NodeAction)[] {
  const groups: (readonly NodeObjectAction[] | NodeAction)[] = [];
  let run: NodeObjectAction[] = [];
  for (const a of actions) {
    if (isNodeObjectAction(a)) {
      run.push(a);
      continue;
    }
    if (run.length > 0) groups.push(run);
    run = [];
    groups.push(a);
  }
  if (run.length > 0) groups.push(run);
  return groups;
}
