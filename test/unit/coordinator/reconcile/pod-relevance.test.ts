import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { PodRelevance } from '../../../../coordinator/reconcile/pod-relevance.ts';

function aPod(nodeName: string, owner?: string): V1Pod {
  return {
    metadata: { name: 'p', ...(owner === undefined ? {} : { ownerReferences: [{ apiVersion: 'apps/v1', kind: owner, name: 'o', uid: 'o', controller: true }] }) },
    spec: { nodeName, containers: [] },
  };
}

describe('PodRelevance', () => {
  it('every change but a pod change is relevant, and so is a cache sync (no object)', () => {
    const relevance = new PodRelevance();
    expect(relevance.isRelevant('nodes', { metadata: { name: 'n' } })).toBe(true);
    expect(relevance.isRelevant('driverrollouts')).toBe(true);
    expect(relevance.isRelevant('pods')).toBe(true);
  });

  it('a pod matters on a node of the last complete pass, or when a DaemonSet owns it', () => {
    const relevance = new PodRelevance();
    relevance.startPass();
    relevance.collect('n1');
    expect(relevance.isRelevant('pods', aPod('n1'))).toBe(false); // the pass has not ended
    relevance.endPass();
    expect(relevance.isRelevant('pods', aPod('n1'))).toBe(true);
    expect(relevance.isRelevant('pods', aPod('n2'))).toBe(false);
    expect(relevance.isRelevant('pods', aPod('n2', 'DaemonSet'))).toBe(true);
    expect(relevance.isRelevant('pods', aPod('n2', 'ReplicaSet'))).toBe(false);
    expect(relevance.isRelevant('pods', aPod('', 'DaemonSet'))).toBe(false); // not scheduled
  });

  it('a pass that does not end leaves the previous nodes in force', () => {
    const relevance = new PodRelevance();
    relevance.startPass();
    relevance.collect('n1');
    relevance.endPass();
    relevance.startPass();
    relevance.collect('n2');
    expect(relevance.isRelevant('pods', aPod('n1'))).toBe(true);
    expect(relevance.isRelevant('pods', aPod('n2'))).toBe(false);
  });
});
