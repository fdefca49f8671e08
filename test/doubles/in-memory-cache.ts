import type { KubernetesObject } from '@kubernetes/client-node';
import { listOf, type IndexBucket, type ResourceCache } from '../../coordinator/cluster/resource-informer.ts';

/**
 * A ResourceCache filled by hand, with the same indexes as the informer's: for unit tests and
 * benchmarks of code that reads caches (snapshot builder, reconciler) without an API server.
 */
export class InMemoryCache<T extends KubernetesObject> implements ResourceCache<T> {
  private readonly objects = new Map<string, T>();
  private readonly indexers: readonly (readonly [string, (object: T) => string | undefined])[];
  private readonly index = new Map<string, Map<string, IndexBucket<T>>>();
  private readonly ingest: ((object: T) => void) | undefined;

  /**
   * `ingest`: what the informer does to each object before storing it (trim, convert; see
   * coordinator/cluster/ingest-cached-object.ts); by default nothing.
   */
  constructor(
    objects: Iterable<T> = [],
    indexes: Readonly<Record<string, (object: T) => string | undefined>> = {},
    ingest?: (object: T) => void,
  ) {
    this.ingest = ingest;
    this.indexers = Object.entries(indexes);
    for (const [name] of this.indexers) this.index.set(name, new Map());
    for (const o of objects) this.put(o);
  }

  put(object: T): void {
    this.ingest?.(object);
    const key = `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;
    this.unindex(key);
    this.objects.set(key, object);
    for (const [name, keyOf] of this.indexers) {
      const indexKey = keyOf(object);
      const buckets = this.index.get(name);
      if (indexKey === undefined || buckets === undefined) continue;
      let bucket = buckets.get(indexKey);
      if (bucket === undefined) buckets.set(indexKey, (bucket = { objects: new Map<string, T>(), list: null }));
      bucket.objects.set(key, object);
      bucket.list = null;
    }
  }

  remove(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    this.unindex(key);
    this.objects.delete(key);
  }

  list(): Iterable<T> {
    return this.objects.values();
  }

  get(namespace: string, name: string): T | undefined {
    return this.objects.get(`${namespace}/${name}`);
  }

  byIndex(index: string, key: string): readonly T[] {
    return listOf(this.index.get(index)?.get(key));
  }

  get size(): number {
    return this.objects.size;
  }

  private unindex(key: string): void {
    const old = this.objects.get(key);
    if (old === undefined) return;
    for (const [name, keyOf] of this.indexers) {
      const indexKey = keyOf(old);
      const bucket = indexKey === undefined ? undefined : this.index.get(name)?.get(indexKey);
      if (bucket === undefined) continue;
      bucket.objects.delete(key);
      bucket.list = null;
    }
  }
}
