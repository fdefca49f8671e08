import { PolicyV1Api, type V1Node } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { installCrd, isPodReady, RolloutWorld } from './harness.ts';

/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;

const kc = sharedCluster().kubeConfig();
let world: RolloutWorld;

beforeAll(async () => {
  await installCrd(kc);
});

afterEach(async () => {
  await world.tearDown();
});

async function oneNodeWorld(prefix: string): Promise<string> {
  world = new RolloutWorld(kc, prefix);
  await world.setUp([{}]);
  await world.createDriver('driver:v1');
  return world.nodeNames[0] ?? '';
}

/** The persisted start time (unix seconds) of a timed state, once the node is in it. */
async function startTime(state: string, key: string): Promise<number> {
  return world.waitForNodes(`${state} with ${key}`, (nodes) => {
    const n = nodes[0];
    const value = n === undefined ? undefined : annotation(n, key);
    return n !== undefined && world.stateOf(n) === state && value !== undefined ? Number(value) : undefined;
  }, 30_000);
}

const annotation = (node: V1Node, key: string): string | undefined => node.metadata?.annotations?.[key];

describe('timeouts and failures, each with real objects', () => {
  it('fails the node when a PodDisruptionBudget blocks the drain past drain.timeoutSeconds, and says which PDB', async () => {
    const node = await oneNodeWorld('pdb');
    await world.createPod(node, 'guarded', { labels: { app: 'guarded' } });
    await kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
      namespace: world.ns.name,
      body: { metadata: { name: 'guard' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } } },
    });
    await world.createRollout({ upgradePolicy: { podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 3 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    await world.bumpDriver('driver:v2');

    // The state label and the drain's start time can land in two passes: wait for both.
    const drainStart = await startTime('drain-required', world.keys.drainStartTime);
    await world.waitForNodes('a reason naming the PDB', (nodes) => (annotation(nodes[0] as V1Node, world.keys.upgradeReason) ?? '').includes('guard') ? true : undefined, HANG_MS);
    const [failed] = await world.waitForStates({ [node]: 'upgrade-failed' }, HANG_MS);
    // Both times as the coordinator wrote them: failed no earlier than the drain timeout. (That a
    // timer, not a poll, fires it is the reconciler's unit test; here load may delay it.)
    const failedAt = Number(annotation(failed as V1Node, world.keys.stateStartTime));
    expect(failedAt - drainStart).toBeGreaterThanOrEqual(3);
    expect(failed?.spec?.unschedulable).toBe(true);
    const pods = (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=guarded' })).items;
    expect(pods).toHaveLength(1);
    // Events go out beside the writes (EventQueue): the state can be seen before its Event.
    const messages = await waitUntil('the upgrade-failed Event', async () => {
      const found = (await world.events(`${world.driver.toUpperCase()}DriverUpgrade`)).map((e) => e.message);
      return found.includes('Successfully updated node state label to [upgrade-failed]') ? found : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    expect(messages).toContain('Successfully updated node state label to [upgrade-failed]');
  });

  it('moves on after waitForCompletion.timeoutSeconds when job pods never finish', async () => {
    const node = await oneNodeWorld('jobs');
    await world.createPod(node, 'training', { labels: { job: 'training' } });
    await world.createRollout({
      upgradePolicy: { waitForCompletion: { podSelector: 'job=training', timeoutSeconds: 3 }, podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 30 } },
    });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    await world.bumpDriver('driver:v2');

    const started = await startTime('wait-for-jobs-required', world.keys.waitForPodCompletionStartTime);
    await world.waitForNodes('the node to leave wait-for-jobs-required', (nodes) => (world.stateOf(nodes[0] as V1Node) !== 'wait-for-jobs-required' ? true : undefined), HANG_MS);
    expect(Date.now() / 1000 - started).toBeGreaterThanOrEqual(3);
    await world.waitForStates({ [node]: 'upgrade-done' }, HANG_MS);
    const pods = await world.driverPods();
    expect(pods.every((p) => p.spec?.containers[0]?.image === 'driver:v2' && isPodReady(p))).toBe(true);
  });

  it('fails the node when validation pods stay unready past validation.timeoutSeconds', async () => {
    const node = await oneNodeWorld('val');
    // A validator that never turns Ready: its readiness gate is never set (like a failing operator-validator).
    await world.core.createNamespacedPod({
      namespace: world.ns.name,
      body: {
        metadata: { name: 'validator', labels: { app: 'validator' } },
        spec: {
          nodeName: node,
          tolerations: [{ operator: 'Exists' }],
          readinessGates: [{ conditionType: 'example.com/validated' }],
          containers: [{ name: 'validate', image: 'validator:v1' }],
        },
      },
    });
    await world.createRollout({ upgradePolicy: { validation: { podSelector: 'app=validator', timeoutSeconds: 3 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    await world.bumpDriver('driver:v2');

    const started = await startTime('validation-required', world.keys.validationStartTime);
    await world.waitForStates({ [node]: 'upgrade-failed' }, HANG_MS);
    expect(Date.now() / 1000 - started).toBeGreaterThanOrEqual(3);
  });

  it('fails the node when no Ready driver pod appears within podRestart.timeoutSeconds, whatever the cause (here a pod that never turns Ready and no agent report)', async () => {
    const node = await oneNodeWorld('podrestart');
    await world.createRollout({ upgradePolicy: { podDeletion: { enable: false }, podRestart: { timeoutSeconds: 3 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    // The new revision's pod never turns Ready (its readiness gate is never set), as with an image
    // pull error or an init container crash loop; no agent reports a failure reason.
    await world.apps.replaceNamespacedDaemonSet({
      name: 'driver',
      namespace: world.ns.name,
      body: world.daemonSetWith({ terminationGracePeriodSeconds: 0, readinessGates: [{ conditionType: 'example.com/never' }], containers: [{ name: 'driver', image: 'driver:v2' }] }),
    });

    const [failed] = await world.waitForStates({ [node]: 'upgrade-failed' }, HANG_MS);
    expect(annotation(failed as V1Node, world.keys.upgradeReason)).toContain('no Ready driver pod 3s after the restart began');
    // The new pod is there (the old one was replaced), just not Ready.
    const [pod] = await world.driverPods();
    expect(pod?.spec?.containers[0]?.image).toBe('driver:v2');
    expect(isPodReady(pod ?? {})).toBe(false);
  });

  it('safe load: cordons and drains before clearing the init container’s annotation, uncordons once the driver is Ready', async () => {
    const node = await oneNodeWorld('safe');
    await world.createRollout({ upgradePolicy: { podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 30 } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    const driverUid = (await world.driverPods())[0]?.metadata?.uid;
    await world.createPod(node, 'workload');
    const seen: { state: string; cordoned: boolean; gate: boolean }[] = [];
    const watch = await world.watchNodes((nodes) => {
      const n = nodes.get(node);
      if (n !== undefined) seen.push({ state: world.stateOf(n), cordoned: n.spec?.unschedulable === true, gate: annotation(n, world.keys.waitForSafeLoad) !== undefined });
      return undefined;
    });

    // What the init container does on a fresh node: set the annotation and block.
    await world.core.patchNode({ name: node, body: { metadata: { annotations: { [world.keys.waitForSafeLoad]: 'true' } } } }, MERGE_PATCH);

    await waitUntil('the annotation to be cleared and the node uncordoned and done', async () => {
      const n = (await world.nodes())[0];
      // The watch can deliver the clearing after a fresh read already shows it: wait for both.
      const watched = seen.some((s, i) => i > 0 && !s.gate && seen[i - 1]?.gate === true);
      return n !== undefined && annotation(n, world.keys.waitForSafeLoad) === undefined && n.spec?.unschedulable !== true && world.stateOf(n) === 'upgrade-done' && watched ? true : undefined;
    }, { timeoutMs: 30_000, intervalMs: 100 });
    watch.stop();

    const cleared = seen.findIndex((s, i) => i > 0 && !s.gate && seen[i - 1]?.gate === true);
    expect(cleared).toBeGreaterThan(0);
    // Cordoned (and drained, below) while the annotation still held the driver back. The clearing
    // may share its patch with the uncordon: this test's KWOK driver pod reads Ready throughout,
    // where a real one stays not Ready until its init container has seen the annotation go.
    expect(seen.slice(0, cleared).some((s) => s.gate && s.cordoned)).toBe(true);
    expect(seen.slice(0, cleared).some((s) => s.state === 'drain-required' || s.state === 'pod-restart-required')).toBe(true);
    expect((await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'workload=true' })).items).toEqual([]);
    // Safe load removes the annotation; it does not restart the driver pod.
    expect((await world.driverPods())[0]?.metadata?.uid).toBe(driverUid);
  });
});
