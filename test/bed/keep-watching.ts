import type { KubeConfig, V1Node, V1Pod } from '@kubernetes/client-node';
import { BookmarkedWatch } from '../../coordinator/cluster/bookmarked-watch.ts';
import { apiErrorMessage } from '../../shared/kube/api-error.ts';

/**
 * A watch that re-opens from the last resourceVersion it saw whenever it ends, until the returned
 * function stops it. client-node ends a watch after 30 s without an event (BookmarkedWatch asks
 * for bookmarks and waits 3 min); on a loaded machine the watched objects can be quiet longer
 * than that between two steps of a test, and a plain Watch then misses everything after.
 * Await `opened` before the change a test wants to see: a change made while the first request is
 * still on its way is not in the watch's initial state nor among its events.
 */
export function keepWatching(kc: KubeConfig, path: string, query: Record<string, string>, handle: (type: string, object: V1Node & V1Pod) => void): KeptWatch {
  let stopped = false;
  let markOpened = (): void => undefined;
  const opened = new Promise<void>((resolve) => {
    markOpened = resolve;
  });
  let current: AbortController | undefined;
  let resourceVersion: string | undefined;
  const history = { opened: 0, events: 0, ended: 0, lastEnd: 'none' };
  const open = (): void => {
    if (stopped) return;
    const params = resourceVersion === undefined ? query : { ...query, resourceVersion };
    new BookmarkedWatch(kc).watch(path, params, (type: string, apiObject: unknown) => {
      // An ERROR event (a Status, e.g. 410 Gone: the resourceVersion is older than the API
      // server's watch window, as under heavy churn) ends the watch: start again from a fresh
      // list, or the watch would re-open at the same resourceVersion and be refused for ever.
      if (type === 'ERROR') {
        resourceVersion = undefined;
        history.lastEnd = `ERROR event ${JSON.stringify(apiObject).slice(0, 200)}`;
        return;
      }
      history.events += 1;
      const object = apiObject as V1Node & V1Pod;
      resourceVersion = object.metadata?.resourceVersion ?? resourceVersion;
      if (type !== 'BOOKMARK') handle(type, object);
    }, (error: unknown) => {
      // A failed request may be the same refusal: start again from a fresh list.
      history.ended += 1;
      if (error !== null && error !== undefined) {
        resourceVersion = undefined;
        history.lastEnd = apiErrorMessage(error);
      }
      setTimeout(open, 200);
    }).then((request) => {
      current = request;
      history.opened += 1;
      markOpened();
      if (stopped) request.abort();
    }, (error: unknown) => {
      history.lastEnd = `not opened: ${apiErrorMessage(error)}`;
      setTimeout(open, 1_000);
    });
  };
  open();
  const stop = (): void => {
    stopped = true;
    current?.abort();
  };
  const describe = (): string => `watch opened ${String(history.opened)} times, ended ${String(history.ended)}, ${String(history.events)} events; last end: ${history.lastEnd}`;
  return Object.assign(stop, { opened, describe });
}

/** Stops the watch when called. */
export interface KeptWatch {
  (): void;
  /** Settles once the first request is open at the API server (its initial state on its way). */
  readonly opened: Promise<void>;
  /** How often the watch was opened and ended, its events, and how it last ended: what a stuck wait shows. */
  describe(): string;
}
