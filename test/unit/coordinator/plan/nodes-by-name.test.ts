import { describe, expect, it } from 'vitest';
import { buildSnapshot } from '../../../../coordinator/cluster/build-snapshot.ts';
import { isKnownByName, markedAsByName } from '../../../../coordinator/plan/nodes-by-name.ts';
import { aNode, aPolicy } from './fixtures.ts';
import { aDaemonSet, aDriverPod, aNode as aCachedNode, aRevision, cachesOf } from '../cluster/fixtures.ts';

describe('nodes-by-name', () => {
  it('knows a list marked as made in name order, and no other list, even one with the same nodes', () => {
    const nodes = [aNode('a').build(), aNode('b').build()];
    expect(markedAsByName(nodes)).toBe(nodes);
    expect(isKnownByName(nodes)).toBe(true);
    expect(isKnownByName([...nodes])).toBe(false);
  });

  it('is told by the snapshot builder, which makes its nodes in name order whatever the cache order', () => {
    const driver = aDaemonSet('gpu-operator', 'driver', { app: 'gpu-driver' });
    const caches = cachesOf({
      nodes: [aCachedNode('n2'), aCachedNode('n1')],
      daemonSets: [driver],
      revisions: [aRevision(driver, 1, 'new')],
      pods: [aDriverPod(driver, 'n2', 'new'), aDriverPod(driver, 'n1', 'new')],
    });
    const snapshot = buildSnapshot({ namespace: 'gpu-operator', name: 'gpu', generation: 1 }, aPolicy(), { caches, writtenNodes: new Map(), evictionBlocked: new Map(), deletedPods: new Map() });
    expect(snapshot.nodes.map((n) => n.name)).toEqual(['n1', 'n2']);
    expect(isKnownByName(snapshot.nodes)).toBe(true);
  });
});
