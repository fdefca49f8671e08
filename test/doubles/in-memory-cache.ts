import type { KubernetesObject } from '@kubernetes/client-node';
import { IndexedStore, type IndexKeyOf } from '../../coordinator/cluster/indexed-store.ts';
import type { ResourceCache } from '../../coordinator/cluster/resource-informer.ts';

/**
 * A ResourceCache filled by hand, kept by the informer's own store (IndexedStore): for unit tests
 * and benchmarks of code that reads caches (snapshot builder, reconciler) without an API server.
 */
export class InMemoryCache<T extends KubernetesObject> extends IndexedStore<T> implements ResourceCache<T> {
  readonly #ingest: ((object: T) => void) | undefined;

  /**
   * `ingest`: what the informer does to each object before storing it (trim, convert; see
   * coordinator/cluster/ingest-cached-object.ts); by default nothing.
   */
  constructor(objects: Iterable<T> = [], indexes: Readonly<Record<string, IndexKeyOf<T>>> = {}, ingest?: (object: T) => void) {
    super(indexes);
    this.#ingest = ingest;
    for (const o of objects) this.put(o);
  }

  put(object: T): void {
    this.#ingest?.(object);
    this.upsert(object);
  }
}
