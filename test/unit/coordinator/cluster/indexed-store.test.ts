import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IndexedStore } from '../../../../coordinator/cluster/indexed-store.ts';

interface Pod {
  readonly metadata: { readonly namespace: string; readonly name: string };
  /** Undefined: not scheduled, so in no node's bucket. */
  readonly node: string | undefined;
  readonly owner: string;
}

const aPod = (name: string, node: string | undefined, owner = 'rs-a', namespace = 'work'): Pod => ({ metadata: { namespace, name }, node, owner });
const INDEXES = { byNode: (p: Pod) => p.node, byOwner: (p: Pod) => p.owner };
const names = (pods: readonly Pod[]): string[] => pods.map((p) => p.metadata.name).sort();

/** A store after these steps: a pod upserted, or [namespace, name] removed. */
function storeAfter(...steps: readonly (Pod | readonly [string, string])[]): IndexedStore<Pod> {
  const store = new IndexedStore<Pod>(INDEXES);
  for (const step of steps) {
    if ('metadata' in step) store.upsert(step);
    else store.remove(step[0], step[1]);
  }
  return store;
}

describe('IndexedStore', () => {
  it.each([
    { name: 'upserts are filed under every index', steps: [aPod('a', 'n1'), aPod('b', 'n1', 'rs-b'), aPod('c', 'n2')], node: 'n1', onNode: ['a', 'b'], owner: 'rs-a', ofOwner: ['a', 'c'] },
    { name: 'a replaced object moves between keys, leaving the old bucket', steps: [aPod('a', 'n1'), aPod('a', 'n2', 'rs-b')], node: 'n1', onNode: [], owner: 'rs-b', ofOwner: ['a'] },
    { name: 'a removed object leaves every index', steps: [aPod('a', 'n1'), aPod('b', 'n1'), ['work', 'a'] as const], node: 'n1', onNode: ['b'], owner: 'rs-a', ofOwner: ['b'] },
    { name: 'an object without an index key is stored but not filed there', steps: [aPod('a', undefined), aPod('b', 'n1')], node: 'n1', onNode: ['b'], owner: 'rs-a', ofOwner: ['a', 'b'] },
    { name: 'the same name in two namespaces is two objects', steps: [aPod('a', 'n1', 'rs-a', 'x'), aPod('a', 'n1', 'rs-a', 'y')], node: 'n1', onNode: ['a', 'a'], owner: 'rs-a', ofOwner: ['a', 'a'] },
    { name: 'removing what is not there changes nothing', steps: [aPod('a', 'n1'), ['work', 'z'] as const, ['other', 'a'] as const], node: 'n1', onNode: ['a'], owner: 'rs-a', ofOwner: ['a'] },
  ])('$name', ({ steps, node, onNode, owner, ofOwner }) => {
    const store = storeAfter(...steps);
    expect(names(store.byIndex('byNode', node))).toEqual(onNode);
    expect(names(store.byIndex('byOwner', owner))).toEqual(ofOwner);
  });

  it('gets by namespace and name, counts, and lists every object', () => {
    const store = storeAfter(aPod('a', 'n1'), aPod('b', undefined), ['work', 'a']);
    expect(store.get('work', 'b')?.metadata.name).toBe('b');
    expect(store.get('work', 'a')).toBeUndefined();
    expect(store.size).toBe(1);
    expect(names([...store.list()])).toEqual(['b']);
  });

  it('an unknown index or key is empty', () => {
    const store = storeAfter(aPod('a', 'n1'));
    expect(store.byIndex('byZone', 'n1')).toEqual([]);
    expect(store.byIndex('byNode', 'n9')).toEqual([]);
  });

  it('hands out the same array while a bucket is unchanged, and a new one once it changes', () => {
    const store = storeAfter(aPod('a', 'n1'), aPod('b', 'n2'));
    const n1 = store.byIndex('byNode', 'n1');
    const n2 = store.byIndex('byNode', 'n2');
    expect(store.byIndex('byNode', 'n1')).toBe(n1);
    store.upsert(aPod('c', 'n1'));
    expect(store.byIndex('byNode', 'n1')).not.toBe(n1);
    expect(names(store.byIndex('byNode', 'n1'))).toEqual(['a', 'c']);
    expect(store.byIndex('byNode', 'n2')).toBe(n2);
  });

  // The invariant the informer relies on: whatever the order of adds, updates and deletes, each
  // index holds exactly the stored objects with that key.
  it('every index always equals the stored objects grouped by their key', () => {
    const pod = fc.record({ name: fc.constantFrom('a', 'b', 'c', 'd'), node: fc.option(fc.constantFrom('n1', 'n2', 'n3'), { nil: undefined }), owner: fc.constantFrom('rs-a', 'rs-b') });
    const step = fc.oneof(pod.map((p) => aPod(p.name, p.node, p.owner)), fc.constantFrom('a', 'b', 'c', 'd').map((name) => ['work', name] as const));
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const store = storeAfter(...steps);
        const stored = [...store.list()];
        for (const node of ['n1', 'n2', 'n3']) expect(names(store.byIndex('byNode', node))).toEqual(names(stored.filter((p) => p.node === node)));
        for (const owner of ['rs-a', 'rs-b']) expect(names(store.byIndex('byOwner', owner))).toEqual(names(stored.filter((p) => p.owner === owner)));
        expect(store.size).toBe(stored.length);
      }),
    );
  });
});
