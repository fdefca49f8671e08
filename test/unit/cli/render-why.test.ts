import type { CoreV1Event, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildWhyViews } from '../../../cli/build-why-views.ts';
import { renderWhy } from '../../../cli/render-why.ts';
import { aNodeView, aRolloutView } from './fixtures.ts';

const NOW = Date.parse('2026-11-22T12:00:00Z');

function aPod(name: string, over: Partial<{ ns: string; labels: Record<string, string>; owner: string; phase: string }> = {}): V1Pod {
  return {
    metadata: {
      name,
      namespace: over.ns ?? 'ml',
      labels: over.labels ?? {},
      ...(over.owner === undefined ? {} : { ownerReferences: [{ apiVersion: 'apps/v1', kind: over.owner, name: `${name}-owner`, uid: 'u' }] }),
    },
    spec: { nodeName: 'gpu-a-2', containers: [] },
    status: { phase: over.phase ?? 'Running' },
  };
}

const pdb: V1PodDisruptionBudget = {
  metadata: { name: 'trainer', namespace: 'ml' },
  spec: { selector: { matchLabels: { app: 'trainer' } } },
  status: { disruptionsAllowed: 0, currentHealthy: 6, desiredHealthy: 6, expectedPods: 8 },
};

const event = (reason: string, message: string, secondsAgo: number, type = 'Normal'): CoreV1Event => ({
  metadata: { name: reason },
  involvedObject: { kind: 'Node', name: 'gpu-a-2' },
  reason,
  message,
  type,
  lastTimestamp: new Date(NOW - secondsAgo * 1000),
});

describe('why NODE', () => {
  const node = aNodeView('gpu-a-2', { pool: 'a', state: 'drain-required', cordoned: true, secondsInState: 130, driverVersion: '1.0.0', reason: 'drain: ml/trainer-1 refused eviction by PodDisruptionBudget ml/trainer' });
  const views = buildWhyViews({
    node: 'gpu-a-2',
    rollouts: [aRolloutView([node])],
    pods: [
      aPod('trainer-1', { labels: { app: 'trainer' }, owner: 'ReplicaSet' }),
      aPod('lonely'),
      aPod('gpu-driver-x', { ns: 'driver-rollout', owner: 'DaemonSet' }),
      aPod('done-job', { owner: 'Job', phase: 'Succeeded' }),
      aPod('pinned', { labels: { 'nvidia.com/gpu-driver-upgrade-drain.skip': 'true' } }),
    ],
    pdbs: [pdb],
    events: [event('GPUDriverUpgrade', 'Successfully updated node state label to [cordon-required]', 140), event('GPUDriverUpgrade', 'Successfully updated node state label to [drain-required]', 130), event('EvictionBlocked', 'Cannot evict pod as it would violate the pod\'s disruption budget.', 20, 'Warning')],
    nowMs: NOW,
  });

  it('lists the reason, the pods a drain would evict with their PDBs, and the newest Events first', () => {
    expect(renderWhy(views, 'gpu-a-2', 100)).toEqual([
      'gpu-a-2 · driver-rollout/gpu (driver gpu) · drain-required for 2m10s',
      'reason: drain: ml/trainer-1 refused eviction by PodDisruptionBudget ml/trainer',
      'cordoned · driver 1.0.0 (ready) · pool a',
      'pods a drain would evict (2):',
      '  ml/trainer-1 (ReplicaSet trainer-1-owner) · PDB trainer',
      '  ml/lonely (no controller)',
      'PodDisruptionBudgets:',
      '  ml/trainer: 0 disruptions allowed, 6/6 healthy · BLOCKS EVICTION',
      'recent events (3):',
      "  20s Warning EvictionBlocked: Cannot evict pod as it would violate the pod's disruption budget.",
      '  2m10s Normal GPUDriverUpgrade: Successfully updated node state label to [drain-required]',
      '  2m20s Normal GPUDriverUpgrade: Successfully updated node state label to [cordon-required]',
    ]);
  });

  it('fits a 40-column terminal', () => {
    for (const line of renderWhy(views, 'gpu-a-2', 40)) expect(line.length).toBeLessThanOrEqual(40);
  });

  it('says when no rollout manages the node', () => {
    expect(renderWhy([], 'cpu-1', 100)).toEqual(['Node cpu-1 is not managed by any DriverRollout found (no upgrade-state label, no driver pod).']);
  });
});
