import { ApiException, type V1Node } from '@kubernetes/client-node';
import { DriverRolloutError } from '../../shared/errors.ts';
import type { NodeMergePatch } from '../../coordinator/plan/node-patch.ts';
import type { JsonPatchOperation } from '../../shared/kube/json-patch.ts';
import { applyJsonPatch } from './apply-json-patch.ts';
import type { PodRef } from '../../coordinator/plan/snapshot.ts';
import type { ClusterEvent, ClusterWriter, EvictionResult } from '../../coordinator/execute/cluster-writer.ts';

/** The API server said no (anything but the idempotent cases the port absorbs). */
export class InMemoryApiError extends DriverRolloutError {}

/**
 * Nodes, pods, Events and statuses in memory with the API server's rules for these calls:
 * merge-patch semantics (null removes a key), JSON Patch semantics (a failed test refuses the
 * whole patch with 422, as the API server's ApiException), resourceVersion bumped per write, UID
 * preconditions on delete/evict, 404 for unknown nodes. `refuseEviction` stands in for a
 * PodDisruptionBudget; `failNext` makes the next call of a kind fail.
 */
export class InMemoryClusterWriter implements ClusterWriter {
  readonly nodes = new Map<string, V1Node>();
  readonly pods = new Map<string, PodRef>();
  readonly events: ClusterEvent[] = [];
  readonly statuses = new Map<string, Readonly<Record<string, unknown>>>();
  /** Every call in order, e.g. `patchNode n1`, `evictPod ns/p`. */
  readonly calls: string[] = [];
  /** Pods (ns/name) whose eviction is refused with this message. */
  readonly refuseEviction = new Map<string, string>();
  readonly failNext = new Set<'patchNode' | 'deletePod' | 'evictPod' | 'emitEvent' | 'patchRolloutStatus'>();
  /** Guarded patches refused with 422 because a test failed: the node changed since it was read. */
  conflicts = 0;
  private version = 0;

  addNode(name: string): void {
    this.nodes.set(name, { metadata: { name, uid: `uid-${name}`, labels: {}, annotations: {}, resourceVersion: this.bump() }, spec: {} });
  }

  addPod(pod: PodRef): void {
    this.pods.set(`${pod.namespace}/${pod.name}`, pod);
  }

  patchNode(name: string, patch: NodeMergePatch): Promise<V1Node> {
    this.calls.push(`patchNode ${name}`);
    this.failIfAsked('patchNode');
    const updated = structuredClone(this.nodeNamed(name));
    const metadata = (updated.metadata ??= {});
    const labels = (metadata.labels ??= {});
    const annotations = (metadata.annotations ??= {});
    for (const [into, changes] of [[labels, patch.metadata?.labels], [annotations, patch.metadata?.annotations]] as const) {
      for (const [k, v] of Object.entries(changes ?? {})) {
        if (v === null) Reflect.deleteProperty(into, k);
        else into[k] = v;
      }
    }
    return Promise.resolve(this.store(name, updated));
  }

  patchNodeGuarded(name: string, patch: readonly JsonPatchOperation[]): Promise<V1Node> {
    this.calls.push(`patchNode ${name}`);
    this.failIfAsked('patchNode');
    const result = applyJsonPatch(this.nodeNamed(name), patch);
    if ('failed' in result) {
      this.conflicts += 1;
      const message = 'the server rejected our request due to an error in our request';
      throw new ApiException(422, message, JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'Invalid', code: 422, message }), {});
    }
    return Promise.resolve(this.store(name, result.patched));
  }

  readNode(name: string): Promise<V1Node> {
    this.calls.push(`readNode ${name}`);
    return Promise.resolve(structuredClone(this.nodeNamed(name)));
  }

  /** Another writer's change to a node (an admin's uncordon, NFD's labels): a new resourceVersion. */
  changeNode(name: string, change: (node: V1Node) => void): void {
    const updated = structuredClone(this.nodeNamed(name));
    change(updated);
    (updated.metadata ??= {}).resourceVersion = this.bump();
    this.nodes.set(name, updated);
  }

  deletePod(pod: PodRef): Promise<void> {
    this.calls.push(`deletePod ${pod.namespace}/${pod.name}`);
    this.failIfAsked('deletePod');
    this.removeIfSameUid(pod);
    return Promise.resolve();
  }

  evictPod(pod: PodRef): Promise<EvictionResult> {
    const key = `${pod.namespace}/${pod.name}`;
    this.calls.push(`evictPod ${key}`);
    this.failIfAsked('evictPod');
    const refusal = this.refuseEviction.get(key);
    if (refusal !== undefined && this.pods.get(key)?.uid === pod.uid) return Promise.resolve({ evicted: false, message: refusal });
    this.removeIfSameUid(pod);
    return Promise.resolve({ evicted: true });
  }

  emitEvent(event: ClusterEvent): Promise<void> {
    this.calls.push(`emitEvent ${event.target.name} ${event.reason}`);
    this.failIfAsked('emitEvent');
    this.events.push(event);
    return Promise.resolve();
  }

  patchRolloutStatus(namespace: string, name: string, status: Readonly<Record<string, unknown>>): Promise<void> {
    this.calls.push(`patchRolloutStatus ${namespace}/${name}`);
    this.failIfAsked('patchRolloutStatus');
    this.statuses.set(`${namespace}/${name}`, { ...this.statuses.get(`${namespace}/${name}`), ...status });
    return Promise.resolve();
  }

  /** DaemonSets (`ns/name`) rolled back, with the revision data sent. */
  readonly rollbacks: { readonly daemonSet: string; readonly data: object }[] = [];

  rollbackDaemonSet(namespace: string, name: string, revisionData: object): Promise<void> {
    this.calls.push(`rollbackDaemonSet ${namespace}/${name}`);
    this.rollbacks.push({ daemonSet: `${namespace}/${name}`, data: revisionData });
    return Promise.resolve();
  }

  private nodeNamed(name: string): V1Node {
    const node = this.nodes.get(name);
    if (node === undefined) throw new InMemoryApiError('node not found', { name, code: 404 });
    return node;
  }

  /** Stores `updated` under a new resourceVersion and returns it. */
  private store(name: string, updated: V1Node): V1Node {
    const metadata = (updated.metadata ??= {});
    this.version = Math.max(this.version, Number(metadata.resourceVersion ?? '0') || 0);
    metadata.resourceVersion = this.bump();
    this.nodes.set(name, updated);
    return updated;
  }

  private removeIfSameUid(pod: PodRef): void {
    const key = `${pod.namespace}/${pod.name}`;
    if (this.pods.get(key)?.uid === pod.uid) this.pods.delete(key);
  }

  private failIfAsked(call: 'patchNode' | 'deletePod' | 'evictPod' | 'emitEvent' | 'patchRolloutStatus'): void {
    if (this.failNext.delete(call)) throw new InMemoryApiError(`${call} failed`, { code: 500 });
  }

  private bump(): string {
    this.version += 1;
    return String(this.version);
  }
}
