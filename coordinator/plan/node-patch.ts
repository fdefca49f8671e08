/**
 * Turns consecutive node-object actions into one JSON merge patch of the Node, so an executor can
 * apply a node's metadata changes atomically (one write, one resourceVersion).
 */
import type { NodeAction, NodeObjectAction } from './action.ts';

export interface NodeMergePatch {
  metadata?: { labels?: Record<string, string | null>; annotations?: Record<string, string | null> };
  spec?: { unschedulable: boolean };
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

/** Later actions win over earlier ones on the same key, as if applied one after another. */
export function nodePatchOf(actions: readonly NodeObjectAction[]): NodeMergePatch {
  const labels: Record<string, string | null> = {};
  const annotations: Record<string, string | null> = {};
  let unschedulable: boolean | undefined;
  for (const a of actions) {
    switch (a.kind) {
      case 'setState':
        labels[a.labelKey] = a.to;
        break;
      case 'cordon':
        unschedulable = true;
        break;
      case 'uncordon':
        unschedulable = false;
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
    }
  }
  const patch: NodeMergePatch = {};
  const metadata: NonNullable<NodeMergePatch['metadata']> = {};
  if (Object.keys(labels).length > 0) metadata.labels = labels;
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  if (metadata.labels !== undefined || metadata.annotations !== undefined) patch.metadata = metadata;
  if (unschedulable !== undefined) patch.spec = { unschedulable };
  return patch;
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
