import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { DeletedPods } from '../../../../coordinator/reconcile/deleted-pods.ts';
import { InMemoryCache } from '../../../doubles/in-memory-cache.ts';

function aPod(name: string, uid: string, deleting = false): V1Pod {
  return { metadata: { namespace: 'ns', name, uid, ...(deleting ? { deletionTimestamp: new Date('2026-11-24T12:00:00Z') } : {}) } };
}

const ref = (name: string, uid: string) => ({ namespace: 'ns', name, uid });

describe('DeletedPods', () => {
  it('keeps a deleted pod until the cache shows it terminating', () => {
    const cache = new InMemoryCache<V1Pod>([aPod('driver-a', 'a1')]);
    const deleted = new DeletedPods();
    deleted.deleted(ref('driver-a', 'a1'));
    deleted.forgetStale(cache);
    expect([...deleted.byUid.keys()]).toEqual(['a1']);
    cache.put(aPod('driver-a', 'a1', true));
    deleted.forgetStale(cache);
    expect(deleted.byUid.size).toBe(0);
  });

  it('forgets a pod the cache no longer holds, or holds under another uid (replaced)', () => {
    const cache = new InMemoryCache<V1Pod>([aPod('driver-b', 'b2')]);
    const deleted = new DeletedPods();
    deleted.deleted(ref('driver-a', 'a1'));
    deleted.deleted(ref('driver-b', 'b1'));
    deleted.forgetStale(cache);
    expect(deleted.byUid.size).toBe(0);
  });

  it('keeps only the pod reference, not the snapshot it came from', () => {
    const deleted = new DeletedPods();
    deleted.deleted({ ...ref('driver-a', 'a1'), phase: 'Running' } as ReturnType<typeof ref>);
    expect(deleted.byUid.get('a1')).toEqual(ref('driver-a', 'a1'));
  });

  it('forgets everything at a new leadership term', () => {
    const deleted = new DeletedPods();
    deleted.deleted(ref('driver-a', 'a1'));
    deleted.clear();
    expect(deleted.byUid.size).toBe(0);
  });
});
