import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import type { CacheKind } from '../cluster/cluster-caches.ts';

/**
 * Which cache changes can matter to a plan. Pods matter only on nodes some DriverRollout
 * manages (as of the last pass) or when a DaemonSet owns them (a driver pod, maybe on a new
 * node): on a large cluster most pod churn is elsewhere and wakes nothing. A pass collects its
 * nodes with `collect` and makes them current with `endPass`.
 */
export class PodRelevance {
  #current = new Set<string>();
  #next = new Set<string>();

  startPass(): void {
    this.#next = new Set();
  }

  collect(nodeName: string): void {
    this.#next.add(nodeName);
  }

  endPass(): void {
    this.#current = this.#next;
  }

  isRelevant(kind: CacheKind, object?: KubernetesObject): boolean {
    if (kind !== 'pods' || object === undefined) return true;
    const pod = object as V1Pod;
    const node = pod.spec?.nodeName ?? '';
    if (node === '') return false;
    return this.#current.has(node) || pod.metadata?.ownerReferences?.some((r) => r.controller === true && r.kind === 'DaemonSet') === true;
  }
}
