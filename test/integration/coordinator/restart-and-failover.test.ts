import { CoordinationV1Api, PolicyV1Api, type V1Node } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectNoChange } from '../../bed/expect-no-change.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { leaseHolder, spawnCoordinator, type CoordinatorProcess } from './coordinator-process.ts';
import { installCrd, isPodReady, RolloutWorld, UPGRADING } from './harness.ts';

const cluster = sharedCluster();
const kc = cluster.kubeConfig();
let world: RolloutWorld;
const processes: CoordinatorProcess[] = [];

beforeAll(async () => {
  await installCrd(kc);
});

afterEach(async () => {
  for (const p of processes.splice(0)) await p.kill('SIGKILL');
  await world.tearDown();
});

function start(identity: string): CoordinatorProcess {
  const p = spawnCoordinator(cluster.kubeconfigPath, world.ns.name, identity);
  processes.push(p);
  return p;
}

/** Bounds on waits only catch a hang: starting a Node program on a loaded machine can take a minute. */
const HANG_MS = 150_000;

/** The Lease's holder and times (ms since epoch), as the replicas wrote them. */
async function leaseTimes(): Promise<{ holder: string | undefined; acquiredMs: number; renewedMs: number; durationMs: number }> {
  const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'coordinator', namespace: world.ns.name });
  return {
    holder: lease.spec?.holderIdentity,
    acquiredMs: new Date(lease.spec?.acquireTime ?? 0).getTime(),
    renewedMs: new Date(lease.spec?.renewTime ?? 0).getTime(),
    durationMs: (lease.spec?.leaseDurationSeconds ?? 0) * 1000,
  };
}

const outOfService = (nodes: ReadonlyMap<string, V1Node>): number =>
  [...nodes.values()].filter((n) => n.spec?.unschedulable === true || UPGRADING.has(world.stateOf(n))).length;

async function allUpgraded(image: string, timeoutMs: number): Promise<void> {
  await waitUntil(`every node upgrade-done on ${image}`, async () => {
    const pods = await world.driverPods();
    if (pods.length !== world.nodeNames.length || !pods.every((p) => isPodReady(p) && p.spec?.containers[0]?.image === image)) return undefined;
    const nodes = await world.nodes();
    return nodes.every((n) => world.stateOf(n) === 'upgrade-done' && n.spec?.unschedulable !== true) ? true : undefined;
  }, { timeoutMs, intervalMs: 200 });
}

describe('the coordinator process', () => {
  it('resumes a drain after SIGKILL and a restart, keeping its start time and the limit', async () => {
    world = new RolloutWorld(kc, 'kill');
    await world.setUp([{}, {}]);
    await world.createDriver('driver:v1');
    const policy = kc.makeApiClient(PolicyV1Api);
    for (const [i, node] of world.nodeNames.entries()) {
      await world.createPod(node, `guarded-${i}`, { labels: { guard: String(i) } });
      await policy.createNamespacedPodDisruptionBudget({
        namespace: world.ns.name,
        body: { metadata: { name: `guard-${i}` }, spec: { minAvailable: 1, selector: { matchLabels: { guard: String(i) } } } },
      });
    }
    await world.createRollout({ upgradePolicy: { maxUnavailable: 1, podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 120 } } });
    const first = start('first');
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])));
    const watch = await world.watchNodes((nodes) => (outOfService(nodes) > 1 ? `${outOfService(nodes)} nodes out of service` : undefined));
    await world.bumpDriver('driver:v2');

    const [drainingNode, drainStart] = await world.waitForNodes('a node draining', (nodes) => {
      const draining = nodes.find((n) => world.stateOf(n) === 'drain-required' && n.metadata?.annotations?.[world.keys.drainStartTime] !== undefined);
      return draining === undefined ? undefined : [draining.metadata?.name, draining.metadata?.annotations?.[world.keys.drainStartTime]] as const;
    });
    expect(await first.kill('SIGKILL')).toBeNull();
    const second = start('second');
    await waitUntil('the restarted coordinator to lead', async () => ((await leaseHolder(kc, world.ns.name)) === 'second' ? true : undefined), { timeoutMs: HANG_MS });
    // Still draining, from the start time the killed process wrote: the drain resumed, not
    // restarted. Watched while the new leader works (the PDB refuses the eviction, so the node
    // stays in drain-required): any change of state or start time fails at once.
    await second.logged('became leader');
    await expectNoChange<V1Node>(kc, {
      path: '/api/v1/nodes',
      query: { fieldSelector: `metadata.name=${drainingNode ?? ''}` },
      list: () => world.core.listNode({ fieldSelector: `metadata.name=${drainingNode ?? ''}` }),
      forMs: 5_000,
      unwanted: (_type, n) => {
        const state = world.stateOf(n);
        const start = n.metadata?.annotations?.[world.keys.drainStartTime];
        return state === 'drain-required' && start === drainStart ? undefined : `state ${state}, drain start ${String(start)} (was ${String(drainStart)})`;
      },
    });
    const resumed = (await world.nodes()).find((n) => n.metadata?.name === drainingNode);
    expect(resumed === undefined ? undefined : world.stateOf(resumed)).toBe('drain-required');
    expect(resumed?.metadata?.annotations?.[world.keys.drainStartTime]).toBe(drainStart);
    for (const i of world.nodeNames.keys()) await policy.deleteNamespacedPodDisruptionBudget({ name: `guard-${i}`, namespace: world.ns.name });

    await allUpgraded('driver:v2', HANG_MS);
    watch.stop();
    expect(watch.violations).toEqual([]);
    await world.waitForStatus('both nodes done', (status) => {
      const nodes = status.nodes as { done?: number; failed?: number } | undefined;
      return nodes?.done === 2 && nodes.failed === 0;
    });
  });

  it('fails over between two replicas: the standby takes over within the lease duration after the leader is SIGKILLed', async () => {
    world = new RolloutWorld(kc, 'ha');
    await world.setUp([{}, {}]);
    await world.createDriver('driver:v1');
    await world.createRollout({ upgradePolicy: { maxUnavailable: 1, podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 30 } } });
    const replicas = [start('replica-a'), start('replica-b')];
    const leader = await waitUntil('a leader', () => leaseHolder(kc, world.ns.name), { timeoutMs: HANG_MS });
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])));

    // Only the leader wrote: every Event so far was recorded by it. A node's Events go out after
    // its patch is answered, so its label can be seen before they are: wait for each node's.
    const upgradeEvents = await waitUntil('each node’s upgrade-done Event', async () => {
      const events = await world.events(`${world.driver.toUpperCase()}DriverUpgrade`);
      const done = (n: string): boolean => events.some((e) => e.object === n && e.message.includes('[upgrade-done]'));
      return world.nodeNames.every(done) ? events : undefined;
    }, { timeoutMs: HANG_MS });
    const reporters = new Set(upgradeEvents.map((e) => e.instance));
    expect([...reporters]).toEqual([leader]);

    const victim = replicas.find((r) => r.identity === leader);
    const standby = replicas.find((r) => r.identity !== leader);
    await victim?.kill('SIGKILL');
    const killedAt = Date.now();
    const lastRenewal = await leaseTimes();
    await waitUntil('the standby to hold the Lease', async () => ((await leaseHolder(kc, world.ns.name)) === standby?.identity ? true : undefined), { timeoutMs: HANG_MS, intervalMs: 50 });
    const takeover = await leaseTimes();
    process.stderr.write(`[coordinator] failover after SIGKILL took ${Date.now() - killedAt} ms (lease duration ${lastRenewal.durationMs} ms)\n`);
    // Never two leaders: the standby took the Lease only after the dead leader's last renewal expired.
    expect(lastRenewal.holder).toBe(leader);
    expect(takeover.acquiredMs).toBeGreaterThanOrEqual(lastRenewal.renewedMs + lastRenewal.durationMs);

    // The new leader does the work.
    await world.bumpDriver('driver:v2');
    await allUpgraded('driver:v2', HANG_MS);

    // A graceful stop releases the Lease: a fresh standby takes over at its next try.
    const third = start('replica-c');
    await third.logged('coordinator started');
    const stoppedAt = Date.now();
    expect(await standby?.kill('SIGTERM')).toBe(0);
    // Released on the way out: right after the exit the stopped replica no longer holds it.
    const afterStop = await leaseTimes();
    expect(['', third.identity]).toContain(afterStop.holder ?? '');
    await waitUntil('replica-c to hold the Lease', async () => ((await leaseHolder(kc, world.ns.name)) === third.identity ? true : undefined), { timeoutMs: HANG_MS, intervalMs: 50 });
    const handover = await leaseTimes();
    process.stderr.write(`[coordinator] handover after SIGTERM took ${Date.now() - stoppedAt} ms\n`);
    expect(handover.holder).toBe(third.identity);
  });
});
