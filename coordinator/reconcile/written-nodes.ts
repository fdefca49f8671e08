import type { V1Node } from '@kubernetes/client-node';
import { freshest } from '../cluster/build-snapshot.ts';
import type { ResourceCache } from '../cluster/resource-informer.ts';

/**
 * Nodes as this replica last wrote them, so that the next pass plans on what was written even
 * before the informer shows it. An entry lasts until the cache holds that version or a newer
 * one, or no longer holds the node at all.
 */
export class WrittenNodes {
  readonly #nodes = new Map<string, V1Node>();

  /** For buildSnapshot. */
  get byName(): ReadonlyMap<string, V1Node> {
    return this.#nodes;
  }

  written(node: V1Node): void {
    this.#nodes.set(node.metadata?.name ?? '', node);
  }

  /**
   * Whether an informer event shows a node exactly as this replica wrote it (the same
   * resourceVersion): nothing new to plan on, since the node's next pass, which follows the
   * write's answer, plans on what was written.
   */
  isOwnEcho(node: V1Node): boolean {
    const version = node.metadata?.resourceVersion;
    return version !== undefined && this.#nodes.get(node.metadata?.name ?? '')?.metadata?.resourceVersion === version;
  }

  /** Forgets what the cache has caught up with, and nodes gone from it. */
  forgetStale(nodes: Pick<ResourceCache<V1Node>, 'get'>): void {
    for (const [name, node] of this.#nodes) {
      // Gone from the cache: deleted (we only ever write nodes the cache showed us), so forget it
      // too, or a deleted node would live on in every snapshot.
      const cached = nodes.get('', name);
      if (cached === undefined || freshest(cached, node) === cached) this.#nodes.delete(name);
    }
  }

  clear(): void {
    this.#nodes.clear();
  }
}
