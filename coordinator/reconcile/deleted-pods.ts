import type { V1Pod } from '@kubernetes/client-node';
import type { ResourceCache } from '../cluster/resource-informer.ts';
import type { PodRef } from '../plan/snapshot.ts';

/**
 * Pods this replica deleted or evicted, by uid, until the pod cache shows them terminating or
 * gone: a pass overlays them as terminating (buildSnapshot), so that a pod watch slower than the
 * DELETE's answer never has the next pass delete the same pod again. A pod the API server has
 * accepted a deletion for never comes back, so the overlay can only be early, never wrong.
 */
export class DeletedPods {
  readonly #pods = new Map<string, PodRef>();

  /** For buildSnapshot. */
  get byUid(): ReadonlyMap<string, PodRef> {
    return this.#pods;
  }

  deleted(pod: PodRef): void {
    this.#pods.set(pod.uid, { namespace: pod.namespace, name: pod.name, uid: pod.uid });
  }

  /** Forgets the pods the cache shows terminating, or no longer holds (by uid). */
  forgetStale(pods: Pick<ResourceCache<V1Pod>, 'get'>): void {
    for (const [uid, ref] of this.#pods) {
      const cached = pods.get(ref.namespace, ref.name);
      if (cached?.metadata?.uid !== uid || cached.metadata.deletionTimestamp != null) this.#pods.delete(uid);
    }
  }

  clear(): void {
    this.#pods.clear();
  }
}
