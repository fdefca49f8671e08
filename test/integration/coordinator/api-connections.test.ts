import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleApiConnections } from '../../bed/api-connection-sampler.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { spawnCoordinator, type CoordinatorProcess } from './coordinator-process.ts';
import { installCrd, isPodReady, RolloutWorld } from './harness.ts';

const cluster = sharedCluster();
const kc = cluster.kubeConfig();
const world = new RolloutWorld(kc, 'conns');
const NODES = 12;
let coordinator: CoordinatorProcess | undefined;

beforeAll(async () => {
  await installCrd(kc);
  await world.setUp(Array.from({ length: NODES }, () => ({})));
  await world.createDriver('driver:v1');
  await world.createRollout({ upgradePolicy: { maxParallelUpgrades: 0, maxUnavailable: '25%' } });
});

afterAll(async () => {
  await coordinator?.kill('SIGKILL');
  await world.tearDown();
});

async function everyNodeOn(image: string): Promise<void> {
  await waitUntil(`every node upgrade-done on ${image}`, async () => {
    const pods = await world.driverPods();
    if (pods.length !== NODES || !pods.every((p) => isPodReady(p) && p.spec?.containers[0]?.image === image)) return undefined;
    const nodes = await world.nodes();
    return nodes.every((n) => world.stateOf(n) === 'upgrade-done' && n.spec?.unschedulable !== true) ? true : undefined;
  }, { timeoutMs: 120_000, intervalMs: 200 });
}

describe('the coordinator process talks to the API server over one keep-alive pool', () => {
  it('opens at most 10 new connections, counted at the API server port, for a whole rollout', async () => {
    const apiPort = Number(new URL(kc.getCurrentCluster()?.server ?? '').port);
    coordinator = spawnCoordinator(cluster.kubeconfigPath, world.ns.name, 'conns');
    const sampler = sampleApiConnections(coordinator.pid, apiPort);
    try {
      await everyNodeOn('driver:v1');
      const beforeRollout = new Set(sampler.seen());
      await world.bumpDriver('driver:v2');
      await everyNodeOn('driver:v2');
      await sampler.stop();
      const opened = [...sampler.seen()].filter((c) => !beforeRollout.has(c));
      console.log(`API connections: ${beforeRollout.size} before the rollout, ${opened.length} opened during it, peak ${sampler.peak()} at once`);
      // 12 nodes × several writes each: one connection per request would be well over 100.
      expect(opened.length).toBeLessThanOrEqual(10);
      // Watches (one per informer), 8 for requests, 1 for the Lease.
      expect(sampler.peak()).toBeLessThanOrEqual(20);
    } finally {
      await sampler.stop();
    }
  });
});
