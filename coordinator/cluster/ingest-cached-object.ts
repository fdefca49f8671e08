import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { nodeFactsOf, podFactsOf } from './snapshot-of-object.ts';
import { trimNode, trimPod } from './trim-cached-object.ts';

/**
 * What the pod informer does to every pod it stores: trims it (trim-cached-object.ts) and converts
 * it to the planner's form once (snapshot-of-object.ts), so that a pass, even a new leader's first
 * over tens of thousands of pods, reads ready-made conversions instead of making them. The
 * conversion reads the trimmed object, so whatever it reads must survive the trim (unit-tested).
 */
export function ingestPod(pod: V1Pod): void {
  trimPod(pod);
  podFactsOf(pod);
}

/** The same for nodes. */
export function ingestNode(node: V1Node): void {
  trimNode(node);
  nodeFactsOf(node);
}
