/**
 * Turns consecutive node-object actions into one write of the Node, so an executor can apply a
 * node's changes atomically: a JSON merge patch of our keys, or, with a cordon change, a JSON
 * Patch guarded by what the change was made from (guardedNodePatch).
 */
import { CORDON_HOLDERS_ANNOTATION } from '../../shared/keys.ts';
import { jsonPointer, type JsonPatchOperation } from '../../shared/kube/json-patch.ts';
import type { NodeAction, NodeObjectAction } from './action.ts';
import { applyCordonChange, type CordonFacts } from './cordon-holders.ts';
import { isStartOfUpgrade } from './pool-capacity.ts';

export interface NodeMergePatch {
  metadata?: { labels?: Record<string, string | null>; annotations?: Record<string, string | null> };
}

/**
 * The node as read, that a patch with a cordon change is made against and guarded by: its fields
 * as stored, absent ones undefined, so that the guard tests exactly what was read.
 */
export interface NodeAsRead {
  readonly name: string;
  /** spec.unschedulable; undefined when absent. */
  readonly unschedulable: boolean | undefined;
  /** metadata.labels; undefined when the node has none. */
  readonly labels: Readonly<Record<string, string>> | undefined;
  /** metadata.annotations; undefined when the node has none. */
  readonly annotations: Readonly<Record<string, string>> | undefined;
  /** The index of the Ready condition in status.conditions when it is True; undefined otherwise. */
  readonly readyAt: number | undefined;
}

/** Whether the patch changes the cordon: it must then be made against the node as read (guardedNodePatch). */
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
 * or an uncordon is left out: it is written only against the node as read (guardedNodePatch).
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
 * (cordon-holders.ts), as a JSON Patch guarded by tests of what the change was made from: the
 * cordon, its holders, every label and annotation the patch writes, each as read, and for a start
 * of an upgrade the Ready condition. The API server applies it only if all still hold (422
 * otherwise), so a concurrent change of any of them (another coordinator's cordon, an admin's
 * uncordon, the node turning NotReady) is never written over, while other writers' changes of
 * other fields (NFD's and GFD's labels, heartbeats) do not refuse it, as a resourceVersion would.
 */
export function guardedNodePatch(actions: readonly NodeObjectAction[], read: NodeAsRead): JsonPatchOperation[] {
  const changes = nodePatchOf(actions).metadata ?? {};
  const before: CordonFacts = { unschedulable: read.unschedulable === true, holders: read.annotations?.[CORDON_HOLDERS_ANNOTATION] };
  const cordon = cordonAfter(actions, before);
  const annotations = { ...changes.annotations };
  if (cordon !== undefined && cordon.holders !== before.holders) annotations[CORDON_HOLDERS_ANNOTATION] = cordon.holders ?? null;
  const ops: JsonPatchOperation[] = [{ op: 'test', path: jsonPointer('spec', 'unschedulable'), value: read.unschedulable ?? null }];
  if (startsUpgrade(actions) && read.readyAt !== undefined) {
    ops.push({ op: 'test', path: jsonPointer('status', 'conditions', read.readyAt, 'type'), value: 'Ready' });
    ops.push({ op: 'test', path: jsonPointer('status', 'conditions', read.readyAt, 'status'), value: 'True' });
  }
  ops.push(...memberOps('labels', read.labels, changes.labels ?? {}, []));
  ops.push(...memberOps('annotations', read.annotations, annotations, [CORDON_HOLDERS_ANNOTATION]));
  if (cordon !== undefined && cordon.unschedulable !== before.unschedulable) ops.push({ op: 'add', path: jsonPointer('spec', 'unschedulable'), value: cordon.unschedulable });
  return ops;
}

/** Whether the actions start the node's upgrade (isStartOfUpgrade: out of upgrade-required into a step). */
export function startsUpgrade(actions: readonly NodeObjectAction[]): boolean {
  return actions.some((a) => a.kind === 'setState' && isStartOfUpgrade(a.from, a.to));
}

/**
 * The tests and changes of one map of the node's metadata: every key changed or in `guard` tested
 * at its value as read (null: absent), then each change made (null: removed, where it was there).
 * A node without the map is tested for that, and given one with the keys set.
 */
function memberOps(map: 'labels' | 'annotations', read: Readonly<Record<string, string>> | undefined, changes: Readonly<Record<string, string | null>>, guard: readonly string[]): JsonPatchOperation[] {
  const keys = [...new Set([...guard, ...Object.keys(changes)])];
  if (keys.length === 0) return [];
  if (read === undefined) {
    const set = Object.entries(changes).filter(([, value]) => value !== null);
    const test: JsonPatchOperation = { op: 'test', path: jsonPointer('metadata', map), value: null };
    return set.length === 0 ? [test] : [test, { op: 'add', path: jsonPointer('metadata', map), value: Object.fromEntries(set) }];
  }
  const ops: JsonPatchOperation[] = keys.map((key) => ({ op: 'test', path: jsonPointer('metadata', map, key), value: read[key] ?? null }));
  for (const [key, value] of Object.entries(changes)) {
    if (value !== null) ops.push({ op: 'add', path: jsonPointer('metadata', map, key), value });
    else if (read[key] !== undefined) ops.push({ op: 'remove', path: jsonPointer('metadata', map, key) });
  }
  return ops;
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
