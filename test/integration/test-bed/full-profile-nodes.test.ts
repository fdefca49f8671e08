import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { startControlPlane } from '../../bed/control-plane.ts';

describe('a full control plane started with nodes', () => {
  it('has every KWOK node Ready with the labels the caller chose', async () => {
    const plane = await startControlPlane({
      profile: 'full',
      nodes: [
        { name: 'pool-a-1', labels: { pool: 'a' } },
        { name: 'pool-b-1', labels: { pool: 'b' }, unschedulable: true },
      ],
    });
    try {
      const nodes = (await plane.kubeConfig().makeApiClient(CoreV1Api).listNode()).items;
      const seen = nodes.map((n) => ({
        name: n.metadata?.name,
        pool: n.metadata?.labels?.pool,
        ready: n.status?.conditions?.find((c) => c.type === 'Ready')?.status,
        unschedulable: n.spec?.unschedulable === true,
      }));
      expect(seen).toEqual([
        { name: 'pool-a-1', pool: 'a', ready: 'True', unschedulable: false },
        { name: 'pool-b-1', pool: 'b', ready: 'True', unschedulable: true },
      ]);
    } finally {
      await plane.stop();
    }
  });

  it('refuses nodes on the api profile, which has no KWOK to run them', async () => {
    await expect(startControlPlane({ profile: 'api', nodes: [{ name: 'x' }] })).rejects.toThrow(/full profile/);
  });
});
