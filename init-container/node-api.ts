/**
 * The port through which the init container sees the Kubernetes API: only its own Node.
 * `createKubeNodeApi` (kube-node-api.ts) talks to a real API server; `InMemoryNodeApi`
 * (test/doubles/in-memory-node-api.ts) is a faithful in-process model used by unit tests.
 *
 * Errors thrown by every method are either a NodeAccessError (permanent: 401/403/404/400/422,
 * never worth retrying) or anything else (transient: network, 5xx, 429, timeouts).
 */
export interface NodeView {
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** spec.unschedulable: the node is cordoned. */
  readonly unschedulable: boolean;
}

export interface NodeListing {
  /** undefined when no node has that name. */
  readonly node: NodeView | undefined;
  /** The list's resourceVersion: a watch started from it misses nothing. */
  readonly resourceVersion: string;
}

export type NodeWatchEvent =
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly node: NodeView }
  /** Only resourceVersion is meaningful on a bookmark. */
  | { readonly type: 'BOOKMARK'; readonly resourceVersion: string }
  /** An in-stream error; code 410 (Expired/Gone) means "re-list, then watch from the new version". */
  | { readonly type: 'ERROR'; readonly code: number; readonly message: string };

export interface NodeApi {
  /**
   * JSON merge patch of metadata.annotations: a string sets a key, null removes it.
   * Resolves when the API server has accepted it.
   */
  patchNodeAnnotations(name: string, annotations: Readonly<Record<string, string | null>>, signal: AbortSignal): Promise<void>;
  /** Lists with `fieldSelector=metadata.name=<name>`: needs only list permission, and tells "absent" apart from "forbidden". */
  listNode(name: string, signal: AbortSignal): Promise<NodeListing>;
  /**
   * Watches only this node from `resourceVersion`. The iterable ends when the server closes the
   * stream (timeout, restart) and throws when the connection fails; both mean "re-watch".
   * Aborting `signal` ends it promptly.
   */
  watchNode(name: string, resourceVersion: string, signal: AbortSignal): AsyncIterable<NodeWatchEvent>;
}
