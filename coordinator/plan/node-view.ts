/**
 * A node as the planner sees it during one pass: the snapshot plus the effects of the actions the
 * pass has already decided for it, so that a node advancing several states in one pass reads its
 * own writes. Also used by applyPlan to replay a plan onto a snapshot.
 */
import { CORDON_HOLDERS_ANNOTATION, isUpgradeState, type UpgradeState } from '../../shared/keys.ts';
import { parseNodeAnnotation, UNIX_SECONDS } from '../../shared/node-annotations.ts';
import type { NodeObjectAction } from './action.ts';
import { applyCordonChange } from './cordon-holders.ts';
import type { NodeSnapshot } from './snapshot.ts';

export interface NodeView {
  readonly snapshot: NodeSnapshot;
  state: UpgradeState;
  unschedulable: boolean;
  /**
   * The snapshot's own objects until the first write, then this view's copies, written in place
   * from then on (most nodes are never written in a pass; one that is written several times is
   * copied once). Read them afresh after an action: the object may change.
   */
  labels: Readonly<Record<string, string>>;
  annotations: Readonly<Record<string, string>>;
  /** `labels` / `annotations` are this view's copies already. */
  ownLabels: boolean;
  ownAnnotations: boolean;
}

export function createNodeView(snapshot: NodeSnapshot, stateLabel: string): NodeView {
  // Every field from the start: a view written in a pass keeps the shape of one that is not, so the
  // optimised code that reads thousands of views per pass sees one shape and outlives the pass.
  return {
    snapshot,
    state: stateOf(snapshot.labels, stateLabel),
    unschedulable: snapshot.unschedulable,
    labels: snapshot.labels,
    annotations: snapshot.annotations,
    ownLabels: false,
    ownAnnotations: false,
  };
}

/** The state label's value; absent, empty or unrecognised reads as `unknown`. */
export function stateOf(labels: Readonly<Record<string, string>>, stateLabel: string): UpgradeState {
  const value = labels[stateLabel];
  return value !== undefined && isUpgradeState(value) ? value : 'unknown';
}

export function applyNodeObjectAction(view: NodeView, action: NodeObjectAction): void {
  switch (action.kind) {
    case 'setState':
      view.state = action.to;
      writableLabels(view)[action.labelKey] = action.to;
      break;
    case 'cordon':
    case 'uncordon': {
      const holders = view.annotations[CORDON_HOLDERS_ANNOTATION];
      const after = applyCordonChange({ unschedulable: view.unschedulable, holders }, action);
      view.unschedulable = after.unschedulable;
      if (after.holders === holders) break;
      if (after.holders === undefined) Reflect.deleteProperty(writableAnnotations(view), CORDON_HOLDERS_ANNOTATION);
      else writableAnnotations(view)[CORDON_HOLDERS_ANNOTATION] = after.holders;
      break;
    }
    case 'setAnnotation':
      writableAnnotations(view)[action.key] = action.value;
      break;
    case 'setLabel':
      writableLabels(view)[action.key] = action.value;
      break;
    case 'removeAnnotation':
    case 'clearSafeLoad':
      if (!(action.key in view.annotations)) break;
      Reflect.deleteProperty(writableAnnotations(view), action.key);
      break;
  }
}

function writableLabels(view: NodeView): Record<string, string> {
  if (!view.ownLabels) {
    view.labels = { ...view.labels };
    view.ownLabels = true;
  }
  return view.labels;
}

function writableAnnotations(view: NodeView): Record<string, string> {
  if (!view.ownAnnotations) {
    view.annotations = { ...view.annotations };
    view.ownAnnotations = true;
  }
  return view.annotations;
}

/** Reads a unix-seconds annotation as ms since epoch; null when absent or not unix seconds (readTimer says so and starts afresh). */
export function readUnixSeconds(annotations: Readonly<Record<string, string>>, key: string): number | null {
  const read = parseNodeAnnotation(UNIX_SECONDS, 'node', key, annotations[key]);
  return typeof read === 'number' ? read : null;
}

/** ms since epoch → the unix-seconds string NVIDIA's start-time annotations hold. */
export function toUnixSeconds(ms: number): string {
  // One pass writes the same time on thousands of nodes: one string for them all.
  if (ms !== lastUnixSeconds.ms) lastUnixSeconds = { ms, text: String(Math.floor(ms / 1000)) };
  return lastUnixSeconds.text;
}

let lastUnixSeconds = { ms: Number.NaN, text: '' };
