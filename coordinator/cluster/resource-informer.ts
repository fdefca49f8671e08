import { ListWatch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { backoffDelay, type BackoffPolicy } from '../../shared/backoff.ts';
import { toError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { BookmarkedWatch } from './bookmarked-watch.ts';
import { IndexedStore } from './indexed-store.ts';

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

/**
 * client-node's ListWatch, plus what a controller needs from it: the objects and their secondary
 * indexes kept in an IndexedStore from the add/update/delete callbacks, and a restart after errors. ListWatch re-lists by
 * itself on 410 Gone but stops for good on any other error (API server restarting, network,
 * 5xx): this restarts it with exponential backoff, resuming from its last resourceVersion.
 */
export function startInformer<T extends KubernetesObject>(options: InformerOptions<T>): ResourceInformer<T> {
  const log = options.logger.child({ informer: options.path });
  const store = new IndexedStore<T>(options.indexes);
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

  const upsert = (object: T): void => {
    options.trim?.(object);
    store.upsert(object);
    options.onChange(object);
  };
  const remove = (object: T): void => {
    store.remove(object.metadata?.namespace, object.metadata?.name);
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
    list: () => store.list(),
    get: (namespace, name) => store.get(namespace, name),
    byIndex: (name, key) => store.byIndex(name, key),
    get size() {
      return store.size;
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
