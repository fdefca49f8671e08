import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { WrittenNodes } from '../../../../coordinator/reconcile/written-nodes.ts';
import { InMemoryCache } from '../../../doubles/in-memory-cache.ts';

function aNode(name: string, resourceVersion: string): V1Node {
  return { metadata: { name, resourceVersion } };
}

describe('WrittenNodes', () => {
  it('keeps a written node until the cache holds that version or a newer one', () => {
    const cache = new InMemoryCache<V1Node>([aNode('n1', '5'), aNode('n2', '5'), aNode('n3', '9')]);
    const written = new WrittenNodes();
    written.written(aNode('n1', '7')); // ahead of the cache
    written.written(aNode('n2', '5')); // the cache caught up
    written.written(aNode('n3', '8')); // the cache is newer
    written.forgetStale(cache);
    expect([...written.byName.keys()]).toEqual(['n1']);
    cache.put(aNode('n1', '7'));
    written.forgetStale(cache);
    expect(written.byName.size).toBe(0);
  });

  it('forgets a node the cache no longer holds (deleted)', () => {
    const written = new WrittenNodes();
    written.written(aNode('gone', '3'));
    written.forgetStale(new InMemoryCache<V1Node>());
    expect(written.byName.size).toBe(0);
  });

  it('the latest write wins, and clear forgets all', () => {
    const written = new WrittenNodes();
    written.written(aNode('n1', '2'));
    written.written(aNode('n1', '3'));
    expect(written.byName.get('n1')?.metadata?.resourceVersion).toBe('3');
    written.clear();
    expect(written.byName.size).toBe(0);
  });

  it('isOwnEcho: an event showing a node at the very resourceVersion this replica wrote', () => {
    const written = new WrittenNodes();
    written.written(aNode('n1', '7'));
    expect(written.isOwnEcho(aNode('n1', '7'))).toBe(true);
    expect(written.isOwnEcho(aNode('n1', '8'))).toBe(false); // someone else changed it since
    expect(written.isOwnEcho(aNode('n1', '6'))).toBe(false);
    expect(written.isOwnEcho(aNode('n2', '7'))).toBe(false);
    expect(written.isOwnEcho({ metadata: { name: 'n1' } })).toBe(false);
  });
});
