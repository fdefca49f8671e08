import { ListWatch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { backoffDelay, type BackoffPolicy } from '../../shared/backoff.ts';
import { toError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { BookmarkedWatch } from './bookmarked-watch.ts';

/** A read-only, always-current copy of one kind of object, fed by a watch. */
export interface ResourceCache<T> {
  /** Every object, in no particular order. O(n): for snapshots, not per object. */
  list(): Iterable<T>;
  get(namespace: string, name: string): T | undefined;
  /**
   * Objects whose key under the named index (see `indexes`) equals `key`, e.g. the pods on one
   * node. The same array for as long as that set is unchanged, so a reader may memoise what it
   * derives from it on the array; never modify it.
   */
  byIndex(index: string, key: string): readonly T[];
  readonly size: number;
}

export interface ResourceInformer<T> extends ResourceCache<T> {
  /** Resolves once the first list has been loaded. */
  readonly synced: Promise<void>;
  isSynced(): boolean;
  stop(): Promise<void>;
}

export interface InformerOptions<T extends KubernetesObject> {
  readonly kc: KubeConfig;
  /** The watch path, e.g. `/api/v1/pods`. */
  readonly path: string;
  readonly list: () => Promise<KubernetesListObject<T>>;
  readonly logger: Logger;
  /** Called on every add, update and delete (after the cache changed) with the object; without one once synced. */
  readonly onChange: (object?: T) => void;
  /** Secondary indexes for `byIndex`, by name: each gives an object's key (e.g. a pod's node name) or undefined. */
  readonly indexes?: Readonly<Record<string, (object: T) => string | undefined>>;
  readonly labelSelector?: string;
  /**
   * Prepares each object in place before it is stored: drops what no reader needs and may
   * convert it for the readers once (see trim-cached-object.ts, ingest-cached-object.ts).
   */
  readonly trim?: (object: T) => void;
  /** Restart backoff after an error; doubles up to `maxBackoffMs`. */
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

/** The objects under one index key, and their list as last handed out (null once changed). */
export interface IndexBucket<T> {
  readonly objects: Map<string, T>;
  list: readonly T[] | null;
}

const NONE: readonly never[] = [];

/** The bucket's objects as an array, made once per change of the bucket (see ResourceCache.byIndex). */
export function listOf<T>(bucket: IndexBucket<T> | undefined): readonly T[] {
  if (bucket === undefined) return NONE;
  return (bucket.list ??= [...bucket.objects.values()]);
}

const keyOf = (o: KubernetesObject): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/**
 * client-node's ListWatch, plus what a controller needs from it: a secondary index kept up to
 * date from the add/update/delete callbacks, and a restart after errors. ListWatch re-lists by
 * itself on 410 Gone but stops for good on any other error (API server restarting, network,
 * 5xx): this restarts it with exponential backoff, resuming from its last resourceVersion.
 */
export function startInformer<T extends KubernetesObject>(options: InformerOptions<T>): ResourceInformer<T> {
  const log = options.logger.child({ informer: options.path });
  const objects = new Map<string, T>();
  const indexers = Object.entries(options.indexes ?? {});
  // index name -> index key -> bucket (object key -> object). An object's keys are not kept per
  // object (a Map per pod was 9 MB over 50,000 pods): they are read again from the stored object,
  // which the cache never changes once trimmed, when it is replaced or removed.
  const index = new Map<string, Map<string, IndexBucket<T>>>(indexers.map(([name]) => [name, new Map()]));
  const minBackoff = options.minBackoffMs ?? 200;
  const maxBackoff = options.maxBackoffMs ?? 30_000;
  const backoff: BackoffPolicy = { initialMs: minBackoff, maxMs: maxBackoff };
  let failures = 0;
  let stopped = false;
  let synced = false;
  let restartTimer: NodeJS.Timeout | undefined;
  let markSynced: () => void = () => undefined;
  const syncedPromise = new Promise<void>((resolve) => {
    markSynced = resolve;
  });

  const unindex = (key: string, stored: T | undefined): void => {
    if (stored === undefined) return;
    for (const [name, indexKeyOf] of indexers) {
      const old = indexKeyOf(stored);
      if (old === undefined) continue;
      const buckets = index.get(name);
      const bucket = buckets?.get(old);
      if (bucket === undefined) continue;
      bucket.objects.delete(key);
      bucket.list = null;
      if (bucket.objects.size === 0) buckets?.delete(old);
    }
  };
  const upsert = (object: T): void => {
    options.trim?.(object);
    const key = keyOf(object);
    unindex(key, objects.get(key));
    objects.set(key, object);
    for (const [name, indexKeyOf] of indexers) {
      const indexKey = indexKeyOf(object);
      const buckets = index.get(name);
      if (indexKey === undefined || buckets === undefined) continue;
      let bucket = buckets.get(indexKey);
      if (bucket === undefined) buckets.set(indexKey, (bucket = { objects: new Map<string, T>(), list: null }));
      bucket.objects.set(key, object);
      bucket.list = null;
    }
    options.onChange(object);
  };
  const remove = (object: T): void => {
    const key = keyOf(object);
    unindex(key, objects.get(key));
    objects.delete(key);
    options.onChange(object);
  };

  const listWatch = new ListWatch<T>(options.path, new BookmarkedWatch(options.kc), options.list, false, options.labelSelector);
  listWatch.on('add', upsert);
  listWatch.on('update', upsert);
  listWatch.on('delete', remove);
  listWatch.on('connect', () => {
    failures = 0;
  });
  listWatch.on('error', (error: unknown) => {
    if (stopped) return;
    const retryInMs = backoffDelay(failures, backoff, Math.random);
    failures += 1;
    log.warn({ err: toError(error), retryInMs }, 'watch failed; restarting');
    restartTimer = setTimeout(start, retryInMs);
  });

  function start(): void {
    if (stopped) return;
    listWatch.start().then(
      () => {
        if (!synced && listWatch.latestResourceVersion() !== '') {
          synced = true;
          markSynced();
          options.onChange();
        }
      },
      (error: unknown) => {
        log.warn({ err: toError(error) }, 'informer start failed');
      },
    );
  }
  start();

  return {
    list: () => objects.values(),
    get: (namespace, name) => objects.get(`${namespace}/${name}`),
    byIndex: (name, key) => listOf(index.get(name)?.get(key)),
    get size() {
      return objects.size;
    },
    synced: syncedPromise,
    isSynced: () => synced,
    async stop() {
      stopped = true;
      clearTimeout(restartTimer);
      await listWatch.stop();
    },
  };
}
