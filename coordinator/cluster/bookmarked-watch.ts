import { Watch, type KubeConfig } from '@kubernetes/client-node';

/**
 * How long a watch may be silent before client-node gives up on it. kube-apiserver sends a
 * bookmark to a watch that asked for them roughly every minute, so a healthy watch is never
 * silent this long.
 */
export const WATCH_SILENCE_LIMIT_MS = 180_000;

/**
 * client-node's Watch with bookmarks on and a longer silence limit. client-node aborts a watch
 * that saw nothing for 30 s, which destroys its connection (an aborted fetch never returns its
 * socket to the pool): every quiet informer (PDBs, DaemonSets, DriverRollouts) would open a new
 * TCP+TLS connection twice a minute. With bookmarks a watch hears from the server every minute,
 * so it lives until the server ends it (its default watch timeout, 30–60 minutes); a bookmark
 * also moves the informer's resourceVersion forward and resets ListWatch's reconnect delay.
 */
export class BookmarkedWatch extends Watch {
  constructor(config: KubeConfig) {
    super(config);
    // TypeScript-private in client-node 2.0.1, a plain field at runtime (30 s by default).
    (this as unknown as { requestTimeoutMs: number }).requestTimeoutMs = WATCH_SILENCE_LIMIT_MS;
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(path, { allowWatchBookmarks: true, ...queryParams }, callback, done);
  }
}
