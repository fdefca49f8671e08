import type { PodRef } from './snapshot.ts';

/**
 * `pods` with those whose uid is in `uids` marked deleting, as the API server records a deletion
 * or eviction it accepted; the same array when none changes, so a reused snapshot stays reused.
 */
export function markDeleting<P extends PodRef & { readonly deleting: boolean }>(pods: readonly P[], uids: { has(uid: string): boolean; readonly size: number }): readonly P[] {
  if (uids.size === 0) return pods;
  let marked: P[] | null = null;
  for (const [i, pod] of pods.entries()) {
    if (pod.deleting || !uids.has(pod.uid)) continue;
    marked ??= [...pods];
    marked[i] = { ...pod, deleting: true };
  }
  return marked ?? pods;
}
