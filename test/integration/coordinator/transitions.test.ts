import { PolicyV1Api, type V1Node } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { installCrd, isPodReady, RolloutWorld } from './harness.ts';

const kc = sharedCluster().kubeConfig();
let world: RolloutWorld;

beforeAll(async () => {
  await installCrd(kc);
});

afterEach(async () => {
  await world.tearDown();
});

async function newWorld(prefix: string, nodes: Parameters<RolloutWorld['setUp']>[0]): Promise<string[]> {
  world = new RolloutWorld(kc, prefix);
  await world.setUp(nodes);
  await world.createDriver('driver:v1');
  return world.nodeNames;
}

const node = (nodes: readonly V1Node[], name: string): V1Node | undefined => nodes.find((n) => n.metadata?.name === name);
const current = async (name: string): Promise<boolean> => {
  const pod = (await world.driverPods()).find((p) => p.spec?.nodeName === name);
  return pod?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pod);
};

describe('state transitions with real objects', () => {
  it('deletes device pods (pod-deletion-required) and, that being enough, skips the drain', async () => {
    const [n] = await newWorld('devpod', [{}]);
    const name = n ?? '';
    await world.createPod(name, 'gpu-job', { resources: { 'example.com/dev': '1' } });
    await world.createPod(name, 'bystander');
    await world.createRollout({
      upgradePolicy: { podDeletion: { force: true, timeoutSeconds: 10, resourcePrefixes: ['example.com/dev'] }, drain: { enable: true, force: true } },
    });
    await world.startCoordinator();
    await world.waitForStates({ [name]: 'upgrade-done' });
    const states: string[] = [];
    const watch = await world.watchNodes((nodes) => {
      const s = world.stateOf(nodes.get(name) as V1Node);
      if (states.at(-1) !== s) states.push(s);
      return undefined;
    });
    await world.bumpDriver('driver:v2');
    await waitUntil('the node upgraded', async () => ((await current(name)) && world.stateOf((await world.nodes())[0] as V1Node) === 'upgrade-done' ? true : undefined), { timeoutMs: 30_000 });
    watch.stop();
    expect(states).toContain('pod-deletion-required');
    expect(states).not.toContain('drain-required');
    const left = (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'workload=true' })).items.map((p) => p.metadata?.name);
    expect(left).toEqual(['bystander']);
  });

  it('leaves skipped nodes alone, never uncordons an admin-cordoned node, and honours the upgrade-requested annotation', async () => {
    const [plain, cordoned, skipped] = await newWorld('rules', [{}, { unschedulable: true }, {}]);
    await world.core.patchNode({ name: skipped ?? '', body: { metadata: { labels: { [world.keys.upgradeSkip]: 'true' } } } }, MERGE_PATCH);
    await world.createRollout({ upgradePolicy: { maxParallelUpgrades: 0, maxUnavailable: '100%', podDeletion: { enable: false }, drain: { enable: true, force: true } } });
    await world.startCoordinator();
    await world.waitForStates({ [plain ?? '']: 'upgrade-done', [cordoned ?? '']: 'upgrade-done' });
    await world.bumpDriver('driver:v2');
    await waitUntil('the two managed nodes upgraded', async () => ((await current(plain ?? '')) && (await current(cordoned ?? '')) ? true : undefined), { timeoutMs: 30_000 });
    const nodes = await world.waitForStates({ [plain ?? '']: 'upgrade-done', [cordoned ?? '']: 'upgrade-done' });
    expect(node(nodes, cordoned ?? '')?.spec?.unschedulable).toBe(true); // the admin's cordon stays
    expect(node(nodes, plain ?? '')?.spec?.unschedulable).not.toBe(true);
    expect(await current(skipped ?? '')).toBe(false); // skip label: still on v1
    // A skipped node is labelled like upstream (upgrade-required) but never taken out of service.
    expect(['upgrade-done', 'upgrade-required']).toContain(world.stateOf(node(nodes, skipped ?? '') as V1Node));
    expect(node(nodes, skipped ?? '')?.spec?.unschedulable).not.toBe(true);

    // upgrade-requested forces a cycle (cordon, drain, uncordon) on a current node; the annotation is consumed.
    const states: string[] = [];
    let reactedAt = 0;
    const watch = await world.watchNodes((all) => {
      const s = world.stateOf(all.get(plain ?? '') as V1Node);
      if (states.at(-1) !== s) states.push(s);
      if (s === 'upgrade-required' && reactedAt === 0) reactedAt = Date.now();
      return undefined;
    });
    const requestedAt = Date.now();
    await world.core.patchNode({ name: plain ?? '', body: { metadata: { annotations: { [world.keys.upgradeRequested]: 'true' } } } }, MERGE_PATCH);
    await waitUntil('a forced upgrade cycle', async () => {
      const n = node(await world.nodes(), plain ?? '');
      return states.includes('cordon-required') && world.stateOf(n as V1Node) === 'upgrade-done' && n?.spec?.unschedulable !== true &&
        n?.metadata?.annotations?.[world.keys.upgradeRequested] === undefined ? true : undefined;
    }, { timeoutMs: 30_000 });
    watch.stop();
    expect(states).toContain('upgrade-required');
    // Event-driven: the annotation's watch event to the coordinator's label write, seen by our own watch.
    const latencyMs = reactedAt - requestedAt;
    process.stderr.write(`[coordinator] reacted to upgrade-requested in ${latencyMs} ms (round trip incl. two watches)\n`);
    expect(latencyMs).toBeLessThan(1_000);
  });

  it('pauses with autoUpgrade false and resumes when it is set back', async () => {
    const [n] = await newWorld('pause', [{}]);
    const name = n ?? '';
    await world.createRollout({ upgradePolicy: { autoUpgrade: false, podDeletion: { enable: false }, drain: { enable: true, force: true } } });
    await world.startCoordinator();
    await world.bumpDriver('driver:v2');
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await current(name)).toBe(false);
    const nodes = await world.nodes();
    expect(['unknown', 'upgrade-done', 'upgrade-required']).toContain(world.stateOf(nodes[0] as V1Node));
    expect(nodes[0]?.spec?.unschedulable).not.toBe(true);
    const paused = ((await world.rollout()).status?.conditions ?? []) as { type: string; status: string }[];
    expect(paused.find((c) => c.type === 'Paused')?.status).toBe('True');

    await world.custom.patchNamespacedCustomObject(
      { group: 'driverrollout.io', version: 'v1alpha1', plural: 'driverrollouts', namespace: world.ns.name, name: 'driver', body: { spec: { upgradePolicy: { autoUpgrade: true } } } },
      MERGE_PATCH,
    );
    await waitUntil('the paused upgrade to finish', async () => ((await current(name)) && world.stateOf((await world.nodes())[0] as V1Node) === 'upgrade-done' ? true : undefined), { timeoutMs: 30_000 });
  });

  it('halts at maxFailedNodes, and a failed node retried by relabelling upgrade-required completes', async () => {
    const [a, b] = await newWorld('halt', [{}, {}]);
    const policy = kc.makeApiClient(PolicyV1Api);
    for (const [i, n] of [a, b].entries()) {
      await world.createPod(n ?? '', `guarded-${i}`, { labels: { guard: 'yes' } });
    }
    await policy.createNamespacedPodDisruptionBudget({
      namespace: world.ns.name,
      body: { metadata: { name: 'guard' }, spec: { minAvailable: 2, selector: { matchLabels: { guard: 'yes' } } } },
    });
    await world.createRollout({ maxFailedNodes: 1, upgradePolicy: { maxParallelUpgrades: 1, podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 2 } } });
    await world.startCoordinator();
    await world.waitForStates({ [a ?? '']: 'upgrade-done', [b ?? '']: 'upgrade-done' });
    await world.bumpDriver('driver:v2');

    const failed = await world.waitForNodes('one failed node', (nodes) => nodes.find((n) => world.stateOf(n) === 'upgrade-failed')?.metadata?.name, 20_000);
    const other = failed === a ? b : a;
    const conditions = await waitUntil('Halted', async () => {
      const cs = ((await world.rollout()).status?.conditions ?? []) as { type: string; status: string }[];
      return cs.find((c) => c.type === 'Halted')?.status === 'True' ? cs : undefined;
    }, { timeoutMs: 10_000 });
    expect(conditions.find((c) => c.type === 'Halted')?.status).toBe('True');
    expect((await world.events('Halted', world.ns.name)).length).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(node(await world.nodes(), other ?? '')?.spec?.unschedulable).not.toBe(true); // the halt kept it untouched

    // The operator fixes the cause and retries the node, as the GPU Operator documents.
    await policy.deleteNamespacedPodDisruptionBudget({ name: 'guard', namespace: world.ns.name });
    await world.core.patchNode({ name: failed, body: { metadata: { labels: { [world.keys.upgradeState]: 'upgrade-required' } } } }, MERGE_PATCH);
    let last = '';
    await waitUntil('the retried node upgraded', async () => {
      const n = node(await world.nodes(), failed);
      last = `${world.stateOf(n as V1Node)}: ${n?.metadata?.annotations?.[world.keys.upgradeReason] ?? ''}`;
      return (await current(failed)) && world.stateOf(n as V1Node) === 'upgrade-done' ? true : undefined;
    }, { timeoutMs: 30_000 }).catch((error: unknown) => {
      throw new Error(`${String(error)}; node ${last}`);
    });
  });
});
