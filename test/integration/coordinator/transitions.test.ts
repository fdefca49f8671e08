import { PolicyV1Api, type V1Node } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { expectNoChange } from '../../bed/expect-no-change.ts';
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

/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;
/**
 * A test's own bound: above the sum of its waits (up to three HANG_MS waits and a few 60 s
 * start-up waits), so a hang fails in the wait that names it, not in the 180 s testTimeout.
 */
const TEST_MS = 5 * HANG_MS;

/** Fails at the first event in `forMs` where `unwanted` names a problem with this test's node `name`. */
const expectNodeUnchanged = (name: string, forMs: number, unwanted: (n: V1Node) => string | undefined): Promise<void> =>
  expectNoChange<V1Node>(kc, {
    path: '/api/v1/nodes',
    query: { fieldSelector: `metadata.name=${name}` },
    list: () => world.core.listNode({ fieldSelector: `metadata.name=${name}` }),
    forMs,
    unwanted: (_type, n) => unwanted(n),
  });

const node = (nodes: readonly V1Node[], name: string): V1Node | undefined => nodes.find((n) => n.metadata?.name === name);
const current = async (name: string): Promise<boolean> => {
  const pod = (await world.driverPods()).find((p) => p.spec?.nodeName === name);
  return pod?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pod);
};

describe('state transitions with real objects', { timeout: TEST_MS }, () => {
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
    await waitUntil('the node upgraded', async () => ((await current(name)) && world.stateOf((await world.nodes())[0] as V1Node) === 'upgrade-done' ? true : undefined), { timeoutMs: HANG_MS });
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
    await waitUntil('the two managed nodes upgraded', async () => ((await current(plain ?? '')) && (await current(cordoned ?? '')) ? true : undefined), { timeoutMs: HANG_MS });
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
      if (s !== 'upgrade-done' && reactedAt === 0) reactedAt = Date.now();
      return undefined;
    });
    const requestedAt = Date.now();
    await world.core.patchNode({ name: plain ?? '', body: { metadata: { annotations: { [world.keys.upgradeRequested]: 'true' } } } }, MERGE_PATCH);
    await waitUntil('a forced upgrade cycle', async () => {
      const n = node(await world.nodes(), plain ?? '');
      return states.includes('cordon-required') && world.stateOf(n as V1Node) === 'upgrade-done' && n?.spec?.unschedulable !== true &&
        n?.metadata?.annotations?.[world.keys.upgradeRequested] === undefined ? true : undefined;
    }, { timeoutMs: HANG_MS });
    watch.stop();
    // upgrade-required may be entered and left within one pass (it does nothing of its own), so
    // the forced cycle shows from cordon-required on.
    expect(states).toContain('cordon-required');
    // Event-driven: the annotation's watch event to the coordinator's label write, seen by our own
    // watch. A figure for the log; the reconciler's unit test shows no poll is involved.
    const latencyMs = reactedAt - requestedAt;
    process.stderr.write(`[coordinator] reacted to upgrade-requested in ${latencyMs} ms (round trip incl. two watches)\n`);
    expect(reactedAt).toBeGreaterThanOrEqual(requestedAt);
  });

  it('pauses with autoUpgrade false and resumes when it is set back', async () => {
    const [n] = await newWorld('pause', [{}]);
    const name = n ?? '';
    await world.createRollout({ upgradePolicy: { autoUpgrade: false, podDeletion: { enable: false }, drain: { enable: true, force: true } } });
    await world.startCoordinator();
    // The coordinator ran: it reports the pause in the status (not just "nothing happened yet").
    await waitUntil('Paused', async () => {
      const cs = ((await world.rollout()).status?.conditions ?? []) as { type: string; status: string }[];
      return cs.find((c) => c.type === 'Paused')?.status === 'True' ? true : undefined;
    }, { timeoutMs: HANG_MS });
    await world.bumpDriver('driver:v2');
    // Paused: the new revision takes nothing out of service and starts no upgrade.
    await expectNodeUnchanged(name, 3_000, (n) => {
      const state = world.stateOf(n);
      if (n.spec?.unschedulable === true) return 'cordoned while paused';
      return ['unknown', 'upgrade-done', 'upgrade-required'].includes(state) ? undefined : `state ${state} while paused`;
    });
    expect(await current(name)).toBe(false);

    await world.custom.patchNamespacedCustomObject(
      { group: 'driverrollout.io', version: 'v1alpha1', plural: 'driverrollouts', namespace: world.ns.name, name: 'driver', body: { spec: { upgradePolicy: { autoUpgrade: true } } } },
      MERGE_PATCH,
    );
    await waitUntil('the paused upgrade to finish', async () => ((await current(name)) && world.stateOf((await world.nodes())[0] as V1Node) === 'upgrade-done' ? true : undefined), { timeoutMs: HANG_MS });
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

    const failed = await world.waitForNodes('one failed node', (nodes) => nodes.find((n) => world.stateOf(n) === 'upgrade-failed')?.metadata?.name, HANG_MS);
    const other = failed === a ? b : a;
    const conditions = await waitUntil('Halted', async () => {
      const cs = ((await world.rollout()).status?.conditions ?? []) as { type: string; status: string }[];
      return cs.find((c) => c.type === 'Halted')?.status === 'True' ? cs : undefined;
    }, { timeoutMs: HANG_MS });
    expect(conditions.find((c) => c.type === 'Halted')?.status).toBe('True');
    // Events go out beside the writes (EventQueue): the condition can be seen before its Event.
    await waitUntil('the Halted Event', async () => ((await world.events('Halted', world.ns.name)).length > 0 ? true : undefined), { timeoutMs: HANG_MS });
    // The halt keeps the other node untouched.
    expect(node(await world.nodes(), other ?? '')?.spec?.unschedulable).not.toBe(true);
    await expectNodeUnchanged(other ?? '', 3_000, (n) => (n.spec?.unschedulable === true ? 'cordoned after the halt' : undefined));

    // The operator fixes the cause and retries the node, as the GPU Operator documents.
    await policy.deleteNamespacedPodDisruptionBudget({ name: 'guard', namespace: world.ns.name });
    await world.core.patchNode({ name: failed, body: { metadata: { labels: { [world.keys.upgradeState]: 'upgrade-required' } } } }, MERGE_PATCH);
    let last = '';
    await waitUntil('the retried node upgraded', async () => {
      const n = node(await world.nodes(), failed);
      last = `${world.stateOf(n as V1Node)}: ${n?.metadata?.annotations?.[world.keys.upgradeReason] ?? ''}`;
      return (await current(failed)) && world.stateOf(n as V1Node) === 'upgrade-done' ? true : undefined;
    }, { timeoutMs: HANG_MS }).catch((error: unknown) => {
      throw new Error(`${String(error)}; node ${last}`);
    });
  });
});
