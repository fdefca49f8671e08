import type { KubernetesObject } from '@kubernetes/client-node';
import type { ResourceCache } from '../../coordinator/cluster/resource-informer.ts';

/**
 * A ResourceCache filled by hand, with the same indexes as the informer's: for unit tests and
 * benchmarks of code that reads caches (snapshot builder, reconciler) without an API server.
 */
export class InMemoryCache<T extends KubernetesObject> implements ResourceCache<T> {
  private readonly objects = new Map<string, T>();
  private readonly indexers: readonly (readonly [string, (object: T) => string | undefined])[];
  private readonly index = new Map<string, Map<string, Map<string, T>>>();

  constructor(objects: Iterable<T> = [], indexes: Readonly<Record<string, (object: T) => string | undefined>> = {}) {
    this.indexers = Object.entries(indexes);
    for (const [name] of this.indexers) this.index.set(name, new Map());
    for (const o of objects) this.put(o);
  }

  put(object: T): void {
    const key = `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;
    this.unindex(key);
    this.objects.set(key, object);
    for (const [name, keyOf] of this.indexers) {
      const indexKey = keyOf(object);
      const buckets = this.index.get(name);
      if (indexKey === undefined || buckets === undefined) continue;
      let bucket = buckets.get(indexKey);
      if (bucket === undefined) buckets.set(indexKey, (bucket = new Map<string, T>()));
      bucket.set(key, object);
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

  byIndex(index: string, key: string): Iterable<T> {
    return this.index.get(index)?.get(key)?.values() ?? [];
  }

  get size(): number {
    return this.objects.size;
  }

  private unindex(key: string): void {
    const old = this.objects.get(key);
    if (old === undefined) return;
    for (const [name, keyOf] of this.indexers) {
      const indexKey = keyOf(old);
      if (indexKey !== undefined) this.index.get(name)?.get(indexKey)?.delete(key);
    }
  }
}
