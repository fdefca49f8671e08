import type { V1Pod } from '@kubernetes/client-node';
import type { ResourceCache } from '../cluster/resource-informer.ts';

/** A refused eviction (a PDB said no), as the snapshot shows it on the pod. */
export interface BlockedEviction {
  readonly at: number;
  readonly message: string;
  readonly namespace: string;
  readonly name: string;
  readonly node: string;
}

/** Evictions refused this long ago are forgotten (the planner retries them anyway). */
export const EVICTION_MEMORY_MS = 10 * 60_000;

/**
 * Refused evictions by pod uid, reported by the executor: memory only, so that a waiting drain
 * can name the PDB that blocks it. Forgotten when old, when the pod is gone, when its node
 * leaves its state (refusals belong to one drain), and at a new leadership term.
 */
export class EvictionMemory {
  readonly #blocked = new Map<string, BlockedEviction>();

  /** For buildSnapshot. */
  get byPodUid(): ReadonlyMap<string, BlockedEviction> {
    return this.#blocked;
  }

  blocked(podUid: string, entry: BlockedEviction): void {
    this.#blocked.set(podUid, entry);
  }

  evicted(podUid: string): void {
    this.#blocked.delete(podUid);
  }

  /** The node left its state (failed, retried, moved on): its drain starts afresh. */
  forgetNode(node: string): void {
    for (const [uid, entry] of this.#blocked) if (entry.node === node) this.#blocked.delete(uid);
  }

  /** Drops refusals older than EVICTION_MEMORY_MS and those of pods no longer in the cache (by uid). */
  forgetStale(nowMs: number, pods: Pick<ResourceCache<V1Pod>, 'get'>): void {
    for (const [uid, entry] of this.#blocked) {
      if (nowMs - entry.at > EVICTION_MEMORY_MS || pods.get(entry.namespace, entry.name)?.metadata?.uid !== uid) {
        this.#blocked.delete(uid);
      }
    }
  }

  clear(): void {
    this.#blocked.clear();
  }
}
