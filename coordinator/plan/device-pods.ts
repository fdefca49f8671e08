/**
 * Which pods use the device, and which pods are gone for our purposes.
 */
import type { DevicePodPolicy } from '../policy/driver-rollout-spec.ts';
import { matchesSelector } from '../policy/label-selector.ts';
import type { PodSnapshot } from './snapshot.ts';

/** Succeeded or Failed: the containers have stopped and hold no device. */
export function isTerminal(pod: PodSnapshot): boolean {
  return pod.phase === 'Succeeded' || pod.phase === 'Failed';
}

/** DaemonSet pods tolerate cordons and come back at once; mirror pods cannot be removed via the API. Neither is ever deleted or evicted. */
export function isNeverRemoved(pod: PodSnapshot): boolean {
  return pod.controllerKind === 'DaemonSet' || pod.mirror;
}

/** A running pod that requests/limits a device resource (by name prefix) or matches the device pod selector. */
export function usesDevice(pod: PodSnapshot, policy: DevicePodPolicy): boolean {
  if (isTerminal(pod)) return false;
  for (const name of pod.resourceNames) {
    for (const prefix of policy.resourcePrefixes) if (name.startsWith(prefix)) return true;
  }
  return policy.podSelector !== null && matchesSelector(policy.podSelector, pod.labels);
}

/** Pods listed as "ns/name", at most `limit` of them, then "and N more". */
export function listPods(pods: readonly { readonly namespace: string; readonly name: string }[], limit = 5): string {
  let text = '';
  // As pods.slice(0, limit): a negative limit counts from the end.
  const shown = limit >= 0 ? Math.min(limit, pods.length) : Math.max(pods.length + limit, 0);
  for (let i = 0; i < shown; i++) {
    const p = pods[i];
    if (p !== undefined) text += i === 0 ? `${p.namespace}/${p.name}` : `, ${p.namespace}/${p.name}`;
  }
  return pods.length > limit ? `${text} and ${pods.length - limit} more` : text;
}
