import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PolicyV1Api,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1ControllerRevision,
  type V1DaemonSet,
  type V1Node,
  type V1Pod,
  type V1PodDisruptionBudget,
} from '@kubernetes/client-node';
import type { Logger } from '../../shared/logger.ts';
import {
  DRIVER_ROLLOUT_GROUP,
  DRIVER_ROLLOUT_PLURAL,
  DRIVER_ROLLOUT_VERSION,
} from '../policy/driver-rollout-spec.ts';
import type { DriverRolloutObject } from '../status/driver-rollout-object.ts';
import { startInformer, type ResourceCache, type ResourceInformer } from './resource-informer.ts';
import { ingestNode, ingestPod } from './ingest-cached-object.ts';
import { listInPages } from './list-in-pages.ts';
import { trimManagedFields } from './trim-cached-object.ts';

export type CacheKind = 'nodes' | 'pods' | 'daemonsets' | 'controllerrevisions' | 'poddisruptionbudgets' | 'driverrollouts';

/** Index names used with `byIndex`. */
export const BY_NODE = 'node';
export const BY_CONTROLLER = 'controller';

/** Every object the coordinator reads, each kept current by a watch. Nothing else is read. */
export interface ClusterCaches {
  readonly nodes: ResourceCache<V1Node>;
  /** Indexed by node name (BY_NODE) and by controller owner uid (BY_CONTROLLER). */
  readonly pods: ResourceCache<V1Pod>;
  readonly daemonSets: ResourceCache<V1DaemonSet>;
  /** Indexed by controller owner uid (BY_CONTROLLER): a DaemonSet's revisions. */
  readonly revisions: ResourceCache<V1ControllerRevision>;
  readonly pdbs: ResourceCache<V1PodDisruptionBudget>;
  readonly rollouts: ResourceCache<DriverRolloutObject>;
  /** undefined once every cache has loaded, else which ones have not. */
  notSyncedReason(): string | undefined;
  readonly synced: Promise<void>;
  stop(): Promise<void>;
}

export interface ClusterCacheOptions {
  readonly kc: KubeConfig;
  /** Namespaces of DriverRollouts and their DaemonSets; empty: all. Nodes, pods and PDBs are always cluster-wide. */
  readonly namespaces: readonly string[];
  readonly logger: Logger;
  /** Every cache change, with the kind (`nodes`, `pods`, ...) and the object (none when a cache has just synced). */
  readonly onChange: (kind: CacheKind, object?: KubernetesObject) => void;
}

const controllerUid = (o: KubernetesObject): string | undefined =>
  o.metadata?.ownerReferences?.find((r) => r.controller === true)?.uid;

/** The pod indexes every pod cache keeps (the informer's, and InMemoryCache in tests). */
export const POD_INDEXES: Readonly<Record<string, (p: V1Pod) => string | undefined>> = {
  [BY_NODE]: (p) => p.spec?.nodeName,
  [BY_CONTROLLER]: controllerUid,
};
export const REVISION_INDEXES: Readonly<Record<string, (r: V1ControllerRevision) => string | undefined>> = {
  [BY_CONTROLLER]: controllerUid,
};

/**
 * Starts one informer per kind (per namespace for the namespaced kinds when namespaces are
 * given). Pods are indexed by node once, in the informer handlers, so a snapshot never scans
 * every pod.
 */
export function startClusterCaches(options: ClusterCacheOptions): ClusterCaches {
  const { kc, logger, onChange } = options;
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const policy = kc.makeApiClient(PolicyV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const all: { name: string; informer: ResourceInformer<KubernetesObject> }[] = [];
  const start = <T extends KubernetesObject>(
    name: string,
    path: string,
    list: () => Promise<KubernetesListObject<T>>,
    indexes?: Readonly<Record<string, (o: T) => string | undefined>>,
    trim: (o: T) => void = trimManagedFields,
  ): ResourceInformer<T> => {
    const kind = name.replace(/\(.*\)$/, '') as CacheKind;
    const informer = startInformer<T>({
      kc,
      path,
      list,
      logger,
      trim,
      onChange: (object) => {
        onChange(kind, object);
      },
      ...(indexes === undefined ? {} : { indexes }),
    });
    all.push({ name, informer });
    return informer;
  };
  const perNamespace = <T extends KubernetesObject>(
    name: string,
    resource: string,
    listAll: () => Promise<KubernetesListObject<T>>,
    listIn: (namespace: string) => Promise<KubernetesListObject<T>>,
    indexes?: Readonly<Record<string, (o: T) => string | undefined>>,
  ): ResourceCache<T> => {
    if (options.namespaces.length === 0) return start(name, resource.replace('{ns}/', ''), listAll, indexes);
    return unionOf(
      options.namespaces.map((ns) => start(`${name}(${ns})`, resource.replace('{ns}', `namespaces/${ns}`), () => listIn(ns), indexes)),
    );
  };
  const rolloutsPath = `/apis/${DRIVER_ROLLOUT_GROUP}/${DRIVER_ROLLOUT_VERSION}/{ns}/${DRIVER_ROLLOUT_PLURAL}`;
  const crd = { group: DRIVER_ROLLOUT_GROUP, version: DRIVER_ROLLOUT_VERSION, plural: DRIVER_ROLLOUT_PLURAL };

  const caches = {
    // The two large kinds are listed in pages, each trimmed as it arrives (list-in-pages.ts).
    nodes: start<V1Node>('nodes', '/api/v1/nodes', () => listInPages((page) => core.listNode(page), ingestNode), undefined, ingestNode),
    pods: start<V1Pod>('pods', '/api/v1/pods', () => listInPages((page) => core.listPodForAllNamespaces(page), ingestPod), POD_INDEXES, ingestPod),
    daemonSets: perNamespace<V1DaemonSet>(
      'daemonsets',
      '/apis/apps/v1/{ns}/daemonsets',
      () => apps.listDaemonSetForAllNamespaces(),
      (namespace) => apps.listNamespacedDaemonSet({ namespace }),
    ),
    revisions: perNamespace<V1ControllerRevision>(
      'controllerrevisions',
      '/apis/apps/v1/{ns}/controllerrevisions',
      () => apps.listControllerRevisionForAllNamespaces(),
      (namespace) => apps.listNamespacedControllerRevision({ namespace }),
      REVISION_INDEXES,
    ),
    pdbs: start<V1PodDisruptionBudget>('poddisruptionbudgets', '/apis/policy/v1/poddisruptionbudgets', () =>
      policy.listPodDisruptionBudgetForAllNamespaces(),
    ),
    rollouts: perNamespace<DriverRolloutObject>(
      'driverrollouts',
      rolloutsPath,
      async () => (await custom.listClusterCustomObject(crd)) as KubernetesListObject<DriverRolloutObject>,
      async (namespace) => (await custom.listNamespacedCustomObject({ ...crd, namespace })) as KubernetesListObject<DriverRolloutObject>,
    ),
  };
  return {
    ...caches,
    notSyncedReason() {
      const waiting = all.filter((a) => !a.informer.isSynced()).map((a) => a.name);
      return waiting.length === 0 ? undefined : `caches not synced: ${waiting.join(', ')}`;
    },
    synced: Promise.all(all.map((a) => a.informer.synced)).then(() => undefined),
    async stop() {
      await Promise.all(all.map((a) => a.informer.stop()));
    },
  };
}

/** Several namespaced caches seen as one. */
function unionOf<T>(caches: readonly ResourceCache<T>[]): ResourceCache<T> {
  // byIndex hands out the same array while no part changed (see ResourceCache.byIndex).
  const joined = new Map<string, { readonly parts: readonly (readonly T[])[]; readonly list: readonly T[] }>();
  return {
    *list() {
      for (const c of caches) yield* c.list();
    },
    get(namespace, name) {
      for (const c of caches) {
        const found = c.get(namespace, name);
        if (found !== undefined) return found;
      }
      return undefined;
    },
    byIndex(index, key) {
      const parts = caches.map((c) => c.byIndex(index, key));
      const at = `${index}\n${key}`;
      const last = joined.get(at);
      if (last !== undefined && last.parts.every((p, i) => p === parts[i])) return last.list;
      const list = parts.flat();
      if (list.length === 0) joined.delete(at);
      else joined.set(at, { parts, list });
      return list;
    },
    get size() {
      return caches.reduce((n, c) => n + c.size, 0);
    },
  };
}
