import { Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';

export interface NoChangeOptions<T extends KubernetesObject> {
  /** A list path the API server can watch, e.g. '/api/v1/nodes'. */
  readonly path: string;
  /** Watch query parameters (labelSelector, fieldSelector, ...). */
  readonly query?: Record<string, string>;
  /** The same list through a typed client (e.g. `() => core.listNode({ labelSelector })`): the watch starts at its resourceVersion. */
  readonly list: () => Promise<{ metadata?: { resourceVersion?: string } }>;
  /** How long nothing unwanted must happen (at most, with `until`). */
  readonly forMs: number;
  /**
   * The change to watch, started once the watch's starting point is fixed (after the list, so
   * nothing it causes is missed); the window ends when it settles, and `forMs` only bounds a
   * hang. A rejection of it rejects, after the window's own verdict.
   */
  readonly until?: () => Promise<unknown>;
  /** Describes why this event is unwanted, or undefined when it is fine. */
  readonly unwanted: (type: string, object: T) => string | undefined;
}

/**
 * Watches `path` for `forMs` and rejects at the first unwanted event (not at the end of the
 * window), naming it; resolves when the window passes quietly. For "nothing happened" checks in
 * place of a fixed sleep followed by a read, which can miss a change that came and went and
 * always waits the whole time even when the change came at once. The watch starts at the current
 * state (a list's resourceVersion), so an object's initial ADDED events are not reported.
 */
export async function expectNoChange<T extends KubernetesObject>(kc: KubeConfig, options: NoChangeOptions<T>): Promise<void> {
  const listed = (await options.list()).metadata?.resourceVersion;
  if (listed === undefined) throw new Error(`listing ${options.path} returned no resourceVersion`);
  let finish: (error?: Error) => void = () => undefined;
  const done = new Promise<void>((resolve, reject) => {
    finish = (error) => {
      if (error === undefined) resolve();
      else reject(error);
    };
  });
  const watch = new Watch(kc);
  // client-node ends a watch that has seen no byte for 30 s (its private requestTimeoutMs), but a
  // quiet watch is what this waits for: only the window ends it.
  Object.assign(watch, { requestTimeoutMs: options.forMs + 10_000 });
  const request = await watch.watch(
    options.path,
    { ...options.query, resourceVersion: listed, allowWatchBookmarks: 'false' },
    (type: string, object: T) => {
      if (type === 'BOOKMARK') return;
      const why = options.unwanted(type, object);
      if (why !== undefined) finish(new Error(`unwanted change (${type} ${object.metadata?.name ?? '?'}): ${why}`));
    },
    (error: unknown) => {
      // The window is the test's; an API server ending the watch early is a test bed failure.
      if (error !== null && error !== undefined && !(error instanceof Error && error.name === 'AbortError')) {
        finish(new Error(`watch on ${options.path} ended early`, { cause: error }));
      }
    },
  );
  const timer = setTimeout(() => {
    finish();
  }, options.forMs);
  const change = options.until?.();
  change?.then(() => { finish(); }, () => { finish(); });
  try {
    await done;
  } finally {
    clearTimeout(timer);
    request.abort();
  }
  await change;
}
