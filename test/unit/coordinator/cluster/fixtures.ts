import type { V1ControllerRevision, V1DaemonSet, V1Node, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { POD_INDEXES, REVISION_INDEXES } from '../../../../coordinator/cluster/cluster-caches.ts';
import { InMemoryCache } from '../../../doubles/in-memory-cache.ts';

export const aNode = (name: string, extra: { labels?: Record<string, string>; annotations?: Record<string, string>; unschedulable?: boolean; ready?: boolean; rv?: string } = {}): V1Node => ({
  metadata: { name, uid: `uid-${name}`, labels: extra.labels ?? {}, annotations: extra.annotations ?? {}, resourceVersion: extra.rv ?? '10' },
  spec: extra.unschedulable === true ? { unschedulable: true } : {},
  status: { conditions: [{ type: 'Ready', status: extra.ready === false ? 'False' : 'True' }] },
});

export const aDaemonSet = (namespace: string, name: string, labels: Record<string, string>): V1DaemonSet => ({
  metadata: { namespace, name, uid: `ds-${namespace}-${name}`, labels },
  spec: { selector: {}, template: {} },
});

export const aRevision = (ds: V1DaemonSet, revision: number, hash: string, created?: Date): V1ControllerRevision => ({
  metadata: {
    ...(created === undefined ? {} : { creationTimestamp: created }),
    namespace: ds.metadata?.namespace ?? '',
    name: `${ds.metadata?.name ?? ''}-${hash}`,
    labels: { 'controller-revision-hash': hash },
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: ds.metadata?.name ?? '', uid: ds.metadata?.uid ?? '', controller: true }],
  },
  revision,
});

export interface PodExtra {
  owner?: { kind: string; uid: string; name?: string };
  labels?: Record<string, string>;
  requests?: Record<string, string>;
  emptyDir?: boolean;
  mirror?: boolean;
  deleting?: boolean;
  /** metadata.creationTimestamp. */
  created?: Date;
  ready?: boolean;
  restarts?: number;
  /** Replaces the generated status fields it names (init container statuses, conditions, ...). */
  status?: Partial<NonNullable<V1Pod['status']>>;
}

/** When a `deleting` pod's deletion was asked for (ms since the epoch). */
export const DELETION_TIME_MS = 1_700_000_000_000;

export const aPod = (namespace: string, name: string, node: string, extra: PodExtra = {}): V1Pod => ({
  metadata: {
    namespace,
    name,
    uid: `pod-${namespace}-${name}`,
    labels: extra.labels ?? {},
    ...(extra.mirror === true ? { annotations: { 'kubernetes.io/config.mirror': 'x' } } : {}),
    // A fixed time: the coordinator reads only whether it is set, and two fixtures built a millisecond apart must be equal.
    ...(extra.deleting === true ? { deletionTimestamp: new Date(DELETION_TIME_MS) } : {}),
    ...(extra.created === undefined ? {} : { creationTimestamp: extra.created }),
    ...(extra.owner === undefined ? {} : { ownerReferences: [{ apiVersion: 'v1', kind: extra.owner.kind, name: extra.owner.name ?? 'owner', uid: extra.owner.uid, controller: true }] }),
  },
  spec: {
    nodeName: node,
    containers: [{ name: 'c', image: 'i', ...(extra.requests === undefined ? {} : { resources: { requests: extra.requests } }) }],
    ...(extra.emptyDir === true ? { volumes: [{ name: 'scratch', emptyDir: {} }] } : {}),
  },
  status: {
    phase: 'Running',
    conditions: [{ type: 'Ready', status: extra.ready === false ? 'False' : 'True' }],
    containerStatuses: [{ name: 'c', image: 'i', imageID: '', ready: true, restartCount: extra.restarts ?? 0 }],
    ...extra.status,
  },
});

export const aDriverPod = (ds: V1DaemonSet, node: string, hash: string, extra: PodExtra = {}): V1Pod =>
  aPod(ds.metadata?.namespace ?? '', `${ds.metadata?.name ?? ''}-${node}`, node, {
    ...extra,
    owner: { kind: 'DaemonSet', uid: ds.metadata?.uid ?? '', name: ds.metadata?.name ?? '' },
    labels: { 'controller-revision-hash': hash, ...extra.labels },
  });

export const aPdb = (namespace: string, name: string, matchLabels: Record<string, string> | undefined, disruptionsAllowed: number): V1PodDisruptionBudget => ({
  metadata: { namespace, name },
  spec: matchLabels === undefined ? {} : { selector: { matchLabels } },
  status: { disruptionsAllowed, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0 },
});

export function cachesOf(objects: { nodes?: V1Node[]; pods?: V1Pod[]; daemonSets?: V1DaemonSet[]; revisions?: V1ControllerRevision[]; pdbs?: V1PodDisruptionBudget[] }) {
  return {
    nodes: new InMemoryCache(objects.nodes ?? []),
    pods: new InMemoryCache(objects.pods ?? [], POD_INDEXES),
    daemonSets: new InMemoryCache(objects.daemonSets ?? []),
    revisions: new InMemoryCache(objects.revisions ?? [], REVISION_INDEXES),
    pdbs: new InMemoryCache(objects.pdbs ?? []),
  };
}
