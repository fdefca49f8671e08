import type { KubernetesListObject, KubernetesObject, V1ListMeta } from '@kubernetes/client-node';

/** Objects per list request when an informer loads a large kind (nodes, pods). */
export const LIST_PAGE_SIZE = 500;

/** One list request: a page of at most `limit` objects, after the page `_continue` names. */
export interface ListPageRequest {
  readonly limit: number;
  readonly _continue?: string;
}

/**
 * A whole list read in pages (limit/continue), each page's objects prepared by `prepare` (the
 * informer's trim) as soon as the page arrives, so that no more than one page of full objects,
 * and no more than one page of response text, is alive at a time. One unpaged list of 50,000 pods
 * is a response of over 100 MB, parsed and then deserialized into a second copy before the first
 * object is trimmed: a transient peak of several hundred MB that the process's resident set
 * keeps long after. `prepare` must be safe to run again on a prepared object (the informer runs
 * its trim on every object it stores).
 *
 * Every page is served from the first page's resourceVersion (the API server keeps the snapshot
 * in the continue token), so the list is as consistent as an unpaged one; a token that expired
 * (410 Gone, a list slower than etcd's compaction) fails the list and the informer lists again.
 */
export async function listInPages<T extends KubernetesObject>(
  listPage: (request: ListPageRequest) => Promise<KubernetesListObject<T>>,
  prepare: (object: T) => void,
  pageSize: number = LIST_PAGE_SIZE,
): Promise<KubernetesListObject<T>> {
  const items: T[] = [];
  let token: string | undefined;
  for (;;) {
    const page = await listPage(token === undefined ? { limit: pageSize } : { limit: pageSize, _continue: token });
    for (const item of page.items) {
      prepare(item);
      items.push(item);
    }
    token = page.metadata?._continue;
    if (token === undefined || token === '') return { ...page, metadata: wholeListMeta(page.metadata), items };
  }
}

/** The last page's list metadata without its continue token: what an unpaged list would carry. */
function wholeListMeta(meta: V1ListMeta | undefined): V1ListMeta {
  return meta?.resourceVersion === undefined ? {} : { resourceVersion: meta.resourceVersion };
}
