/** What the store needs of an object: its namespace and name, which make its key. */
export interface Keyed {
  readonly metadata?: { readonly namespace?: string | undefined; readonly name?: string | undefined } | undefined;
}

/** Gives an object's key under one index (e.g. a pod's node name), or undefined: not indexed there. */
export type IndexKeyOf<T> = (object: T) => string | undefined;

/** The objects under one index key, and their list as last handed out (null once changed). */
export interface IndexBucket<T> {
  readonly objects: Map<string, T>;
  list: readonly T[] | null;
}

const NONE: readonly never[] = [];

/** The bucket's objects as an array, made once per change of the bucket (see IndexedStore.byIndex). */
export function listOf<T>(bucket: IndexBucket<T> | undefined): readonly T[] {
  if (bucket === undefined) return NONE;
  return (bucket.list ??= [...bucket.objects.values()]);
}

/**
 * Objects by `<namespace>/<name>`, with secondary indexes kept up to date on every upsert and
 * removal: the bookkeeping of an informer's cache, pure (no watch, no clock). An object's index
 * keys are not kept per object (a Map per object costs megabytes over tens of thousands of pods):
 * they are read again from the stored object when it is replaced or removed, so a stored object
 * must not change once stored.
 */
export class IndexedStore<T extends Keyed> {
  readonly #objects = new Map<string, T>();
  readonly #indexers: readonly (readonly [string, IndexKeyOf<T>])[];
  /** index name -> index key -> bucket (object key -> object). */
  readonly #index = new Map<string, Map<string, IndexBucket<T>>>();

  constructor(indexes: Readonly<Record<string, IndexKeyOf<T>>> = {}) {
    this.#indexers = Object.entries(indexes);
    for (const [name] of this.#indexers) this.#index.set(name, new Map());
  }

  /** Stores `object` under its key, replacing (and unindexing) the one stored there, and indexes it. */
  upsert(object: T): void {
    const key = keyOf(object.metadata?.namespace, object.metadata?.name);
    this.#unindex(key, this.#objects.get(key));
    this.#objects.set(key, object);
    for (const [name, indexKeyOf] of this.#indexers) {
      const indexKey = indexKeyOf(object);
      const buckets = this.#index.get(name);
      if (indexKey === undefined || buckets === undefined) continue;
      let bucket = buckets.get(indexKey);
      if (bucket === undefined) buckets.set(indexKey, (bucket = { objects: new Map<string, T>(), list: null }));
      bucket.objects.set(key, object);
      bucket.list = null;
    }
  }

  /** Removes the object stored at `<namespace>/<name>` from the store and every index; returns it. */
  remove(namespace: string | undefined, name: string | undefined): T | undefined {
    const key = keyOf(namespace, name);
    const stored = this.#objects.get(key);
    this.#unindex(key, stored);
    this.#objects.delete(key);
    return stored;
  }

  /** Every object, in no particular order. O(n): for snapshots, not per object. */
  list(): Iterable<T> {
    return this.#objects.values();
  }

  get(namespace: string, name: string): T | undefined {
    return this.#objects.get(keyOf(namespace, name));
  }

  /**
   * Objects whose key under the named index equals `key`. The same array for as long as that set
   * is unchanged, so a reader may memoise what it derives from it on the array; never modify it.
   */
  byIndex(index: string, key: string): readonly T[] {
    return listOf(this.#index.get(index)?.get(key));
  }

  get size(): number {
    return this.#objects.size;
  }

  #unindex(key: string, stored: T | undefined): void {
    if (stored === undefined) return;
    for (const [name, indexKeyOf] of this.#indexers) {
      const old = indexKeyOf(stored);
      if (old === undefined) continue;
      const buckets = this.#index.get(name);
      const bucket = buckets?.get(old);
      if (bucket === undefined) continue;
      bucket.objects.delete(key);
      bucket.list = null;
      if (bucket.objects.size === 0) buckets?.delete(old);
    }
  }
}

function keyOf(namespace: string | undefined, name: string | undefined): string {
  return `${namespace ?? ''}/${name ?? ''}`;
}
