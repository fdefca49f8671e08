import type { V1Node } from '@kubernetes/client-node';
import type { JsonPatchOperation } from '../../shared/kube/json-patch.ts';
import type { NodeMergePatch } from '../plan/node-patch.ts';
import type { PodRef } from '../plan/snapshot.ts';

/** The answer of the Eviction API: done (or nothing left to evict), or refused for now (HTTP 429, e.g. a PDB). */
export type EvictionResult = { readonly evicted: true } | { readonly evicted: false; readonly message: string };

export interface EventTarget {
  readonly kind: 'Node' | 'DriverRollout';
  readonly name: string;
  /** Namespace of the object; '' for a Node. */
  readonly namespace: string;
  readonly uid?: string | undefined;
  readonly apiVersion?: string | undefined;
}

export interface ClusterEvent {
  readonly target: EventTarget;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
  /** When it happened (firstTimestamp, lastTimestamp); the time it is sent when absent. */
  readonly at?: Date | undefined;
}

/**
 * Every write the coordinator makes, each idempotent: deleting or evicting a pod that is gone
 * (404) or was replaced by another with the same name (409 on the UID precondition) succeeds.
 * Other API errors are thrown unchanged.
 */
export interface ClusterWriter {
  /** A JSON merge patch of the Node; returns the Node as stored after the patch. */
  patchNode(name: string, patch: NodeMergePatch): Promise<V1Node>;
  /**
   * A JSON Patch of the Node (guardedNodePatch); returns the Node as stored after it. Refused as a
   * whole with HTTP 422 (thrown) when one of its tests fails: the Node changed since it was read.
   */
  patchNodeGuarded(name: string, patch: readonly JsonPatchOperation[]): Promise<V1Node>;
  /** The Node as the API server has it now (a read after a refused guard). */
  readNode(name: string): Promise<V1Node>;
  deletePod(pod: PodRef): Promise<void>;
  evictPod(pod: PodRef): Promise<EvictionResult>;
  emitEvent(event: ClusterEvent): Promise<void>;
  /** A JSON merge patch of the DriverRollout's status subresource. */
  patchRolloutStatus(namespace: string, name: string, status: Readonly<Record<string, unknown>>): Promise<void>;
  /**
   * Puts a DaemonSet's template back to an older ControllerRevision's, as `kubectl rollout undo`
   * does: the revision's `data` (`{"spec":{"template":{..., "$patch":"replace"}}}`) sent as a
   * strategic merge patch of the DaemonSet. Needs `patch` on that DaemonSet (the chart grants it
   * only for rollouts with onCanaryFailure: Rollback).
   */
  rollbackDaemonSet(namespace: string, name: string, revisionData: object): Promise<void>;
}
