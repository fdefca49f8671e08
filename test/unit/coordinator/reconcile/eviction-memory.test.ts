import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { EVICTION_MEMORY_MS, EvictionMemory, type BlockedEviction } from '../../../../coordinator/reconcile/eviction-memory.ts';
import { InMemoryCache } from '../../../doubles/in-memory-cache.ts';

function aPod(name: string, uid: string): V1Pod {
  return { metadata: { namespace: 'ns', name, uid } };
}

function refusal(name: string, node: string, at = 0): BlockedEviction {
  return { at, message: `PDB blocks ${name}`, namespace: 'ns', name, node };
}

describe('EvictionMemory', () => {
  it('remembers a refusal by pod uid until the pod is evicted', () => {
    const memory = new EvictionMemory();
    memory.blocked('u1', refusal('p1', 'n1'));
    expect(memory.byPodUid.get('u1')).toMatchObject({ message: 'PDB blocks p1' });
    memory.evicted('u1');
    expect(memory.byPodUid.size).toBe(0);
  });

  it("forgets a node's refusals when the node leaves its state, and keeps other nodes'", () => {
    const memory = new EvictionMemory();
    memory.blocked('u1', refusal('p1', 'n1'));
    memory.blocked('u2', refusal('p2', 'n1'));
    memory.blocked('u3', refusal('p3', 'n2'));
    memory.forgetNode('n1');
    expect([...memory.byPodUid.keys()]).toEqual(['u3']);
  });

  it('forgets refusals older than the memory and those of pods gone or replaced (another uid)', () => {
    const pods = new InMemoryCache<V1Pod>([aPod('old', 'u1'), aPod('fresh', 'u2'), aPod('replaced', 'u3-new')]);
    const memory = new EvictionMemory();
    memory.blocked('u1', refusal('old', 'n1', 0));
    memory.blocked('u2', refusal('fresh', 'n1', 1000));
    memory.blocked('u3', refusal('replaced', 'n1', 1000));
    memory.blocked('u4', refusal('deleted', 'n1', 1000));
    memory.forgetStale(EVICTION_MEMORY_MS + 1, pods);
    expect([...memory.byPodUid.keys()]).toEqual(['u2']);
  });

  it('clear forgets everything (a new leadership term)', () => {
    const memory = new EvictionMemory();
    memory.blocked('u1', refusal('p1', 'n1'));
    memory.clear();
    expect(memory.byPodUid.size).toBe(0);
  });
});
