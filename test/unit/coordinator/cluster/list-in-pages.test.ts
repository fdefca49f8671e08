import type { KubernetesListObject, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { listInPages, type ListPageRequest } from '../../../../coordinator/cluster/list-in-pages.ts';
import { trimPod } from '../../../../coordinator/cluster/trim-cached-object.ts';

const pod = (i: number): V1Pod => ({
  metadata: { name: `p-${i}`, namespace: 'ml', managedFields: [{ manager: 'kubelet', operation: 'Update' }] },
  spec: { nodeName: 'gpu-1', containers: [{ name: 'main', image: 'app:1', env: [{ name: 'A', value: 'b' }] }] },
});

/** An API server's paged list over `count` pods at resourceVersion "42"; records every request. */
function pagedServer(count: number): { requests: ListPageRequest[]; listPage: (r: ListPageRequest) => Promise<KubernetesListObject<V1Pod>> } {
  const requests: ListPageRequest[] = [];
  return {
    requests,
    listPage: (r) => {
      requests.push(r);
      const start = r._continue === undefined ? 0 : Number(r._continue);
      const end = Math.min(count, start + r.limit);
      const items = Array.from({ length: end - start }, (_, k) => pod(start + k));
      return Promise.resolve({ apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: '42', ...(end < count ? { _continue: String(end), remainingItemCount: count - end } : {}) }, items });
    },
  };
}

describe('listInPages', () => {
  it('reads every page in order and returns one list at the snapshot\'s resourceVersion, without a continue token', async () => {
    const server = pagedServer(1_234);
    const list = await listInPages(server.listPage, () => undefined, 500);
    expect(server.requests).toEqual([{ limit: 500 }, { limit: 500, _continue: '500' }, { limit: 500, _continue: '1000' }]);
    expect(list.items.map((p) => p.metadata?.name)).toEqual(Array.from({ length: 1_234 }, (_, i) => `p-${i}`));
    expect(list.metadata).toEqual({ resourceVersion: '42' });
  });

  it('prepares each page as it arrives, before the next is asked for', async () => {
    const server = pagedServer(10);
    const seen: number[] = [];
    await listInPages((r) => {
      seen.push(-server.requests.length - 1);
      return server.listPage(r);
    }, (p) => {
      seen.push(Number(p.metadata?.name?.slice(2)));
    }, 4);
    expect(seen).toEqual([-1, 0, 1, 2, 3, -2, 4, 5, 6, 7, -3, 8, 9]);
  });

  it('hands the informer objects already trimmed, and trimming them again changes nothing', async () => {
    const list = await listInPages(pagedServer(3).listPage, trimPod, 2);
    const once = structuredClone(list.items);
    expect(once[0]).toEqual({ metadata: { name: 'p-0', namespace: 'ml' }, spec: { nodeName: 'gpu-1', containers: [{ name: 'main' }] } });
    for (const p of list.items) trimPod(p);
    expect(list.items).toEqual(once);
  });

  it('reads an empty list in one request', async () => {
    const server = pagedServer(0);
    expect((await listInPages(server.listPage, () => undefined)).items).toEqual([]);
    expect(server.requests).toHaveLength(1);
  });

  it('fails when a page fails (an expired continue token): the informer lists again from the start', async () => {
    const server = pagedServer(10);
    const attempt = listInPages(async (r) => {
      if (r._continue !== undefined) throw new Error('410 Gone: the provided continue parameter is too old');
      return server.listPage(r);
    }, () => undefined, 4);
    await expect(attempt).rejects.toThrow(/continue parameter is too old/);
  });
});
