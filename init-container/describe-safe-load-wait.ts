import { NODE_ANNOTATIONS, parseNodeAnnotation } from '../shared/node-annotations.ts';
import type { NodeView } from './node-api.ts';

/** What the gate is waiting for and what it sees, as logged every 30 s (pino fields). */
export interface SafeLoadWaitReport {
  readonly node: string;
  readonly waitingFor: string;
  /** The annotation's current value; null when absent (or not seen yet). */
  readonly annotationValue: string | null;
  /** spec.unschedulable; null before the node was first seen. */
  readonly cordoned: boolean | null;
  /** The driver's upgrade-state label, `unknown` when absent, null when no label key is configured. */
  readonly upgradeState: string | null;
  readonly waitedSeconds: number;
  /** Whether a watch stream is open now, or the gate is reconnecting. */
  readonly watch: 'open' | 'reconnecting';
}

/** Safe to load once the annotation is gone or empty: the coordinator's way of saying "drained". */
export function isSafeLoadCleared(node: NodeView, annotationKey: string): boolean {
  const value = parseNodeAnnotation(NODE_ANNOTATIONS.waitForSafeLoad, `node/${node.name}`, annotationKey, node.annotations[annotationKey]);
  return value === undefined || value === '';
}

export function describeSafeLoadWait(input: {
  readonly nodeName: string;
  readonly annotationKey: string;
  readonly stateLabelKey: string | undefined;
  readonly node: NodeView | undefined;
  readonly waitedMs: number;
  readonly watchOpen: boolean;
}): SafeLoadWaitReport {
  const { node, stateLabelKey } = input;
  return {
    node: input.nodeName,
    waitingFor: `annotation ${input.annotationKey} to be removed from node ${input.nodeName} (the upgrade coordinator removes it once the node is cordoned and drained)`,
    annotationValue: node?.annotations[input.annotationKey] ?? null,
    cordoned: node === undefined ? null : node.unschedulable,
    upgradeState: stateLabelKey === undefined ? null : (node?.labels[stateLabelKey] ?? 'unknown'),
    waitedSeconds: Math.floor(input.waitedMs / 1000),
    watch: input.watchOpen ? 'open' : 'reconnecting',
  };
}
