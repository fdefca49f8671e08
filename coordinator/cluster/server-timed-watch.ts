import { Watch } from '@kubernetes/client-node';

/** Below client-node's 30 s watch inactivity timeout, so the server always ends a quiet watch first. */
export const WATCH_TIMEOUT_SECONDS = 25;

/**
 * client-node's Watch, with every watch ended by the API server after WATCH_TIMEOUT_SECONDS
 * and bookmarks on. Without a server timeout, client-node aborts a watch that saw nothing for
 * 30 s, which destroys its connection: every quiet informer would open a new TCP+TLS
 * connection twice a minute. Ended by the server, the response completes, the connection goes
 * back to the keep-alive pool and the informer's next watch (from its last resourceVersion)
 * reuses it. The bookmark the server sends shortly before the timeout moves the
 * resourceVersion forward and resets ListWatch's reconnect delay, which otherwise grows with
 * every event-less watch.
 */
export class ServerTimedWatch extends Watch {
  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(path, { timeoutSeconds: WATCH_TIMEOUT_SECONDS, allowWatchBookmarks: true, ...queryParams }, callback, done);
  }
}
