import type { V1Node } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CORDONED_STATES } from '../../../coordinator/plan/cordon-lost.ts';
import { CORDON_HOLDERS_ANNOTATION, cordonHolderOf, upgradeEventReason, type UpgradeState } from '../../../shared/keys.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { setNodeReady } from '../../chaos/run-scenario.ts';
import { isPodReady, UPGRADING, useRolloutWorlds, type RolloutWorld } from './harness.ts';

// Issue 33: who holds a node's cordon, and a cluster-wide NotReady blip, on the real control
// plane (KWOK nodes and driver pods, the coordinator in this process).

const worlds = useRolloutWorlds({ beforeAll, afterEach });

/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;

const isNodeReady = (n: V1Node): boolean => n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
const holdersOf = (n: V1Node | undefined): string | undefined => n?.metadata?.annotations?.[CORDON_HOLDERS_ANNOTATION];

async function allCurrentAndReady(world: RolloutWorld, image: string): Promise<boolean> {
  const pods = await world.driverPods();
  return pods.length === world.nodeNames.length && pods.every((p) => p.spec?.containers[0]?.image === image && p.metadata?.deletionTimestamp == null && isPodReady(p));
}

describe('cordon holders, real control plane', () => {
  it('a node uncordoned from outside at each step after the cordon is cordoned again, its device pod evicted before the driver restart, with a Warning naming the holder; an admin\'s cordon stays', async () => {
    const world = worlds.create('holders');
    const states = [...CORDONED_STATES];
    // One node per step, and one an admin cordoned before the upgrade.
    await world.setUp([...states.map(() => ({})), { unschedulable: true }]);
    const admin = world.nodeNames.at(-1) ?? '';
    await world.createDriver('driver:v1');
    await world.createRollout({ upgradePolicy: { maxUnavailable: '100%', maxParallelUpgrades: 0, podDeletion: { enable: true, force: true, timeoutSeconds: 600 } } });
    const first = await world.startCoordinator();
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])), HANG_MS);
    await first.stop();

    // As a coordinator stopped mid-upgrade left them, each in its step, cordoned and held by this
    // driver; then uncordoned from outside (kubectl uncordon), and a device pod landed on each.
    await world.bumpDriver('driver:v2');
    const holder = cordonHolderOf(world.keys);
    const since = String(Math.floor(Date.now() / 1000));
    for (const [i, state] of states.entries()) {
      const name = world.nodeNames[i] ?? '';
      await world.core.patchNode({
        name,
        body: {
          metadata: {
            labels: { [world.keys.upgradeState]: state },
            annotations: { [CORDON_HOLDERS_ANNOTATION]: holder, [world.keys.upgradeStartTime]: since, [world.keys.stateStartTime]: since },
          },
          spec: { unschedulable: false },
        },
      }, MERGE_PATCH);
      await world.createPod(name, `gpu-work-${String(i)}`, { labels: { app: 'gpu-work' }, resources: { 'nvidia.com/gpu': '1' } });
    }
    // Once cordoned again, no node is seen schedulable in a step that needs it cordoned.
    const cordonedAgain = new Set<string>();
    const watch = await world.watchNodes((nodes) => {
      for (const n of nodes.values()) {
        const name = n.metadata?.name ?? '';
        if (!CORDONED_STATES.has(world.stateOf(n) as UpgradeState)) continue;
        if (n.spec?.unschedulable === true) cordonedAgain.add(name);
        else if (cordonedAgain.has(name)) return `${name} schedulable again in ${world.stateOf(n)}`;
      }
      return undefined;
    });
    await world.startCoordinator();
    await world.waitForNodes('every node upgrade-done on the new driver', (nodes) =>
      nodes.every((n) => world.stateOf(n) === 'upgrade-done') ? true : undefined, HANG_MS);
    await world.waitForDriverPods((pods) => pods.length === world.nodeNames.length && pods.every((p) => p.spec?.containers[0]?.image === 'driver:v2'), HANG_MS);
    watch.stop();
    expect(await allCurrentAndReady(world, 'driver:v2')).toBe(true);

    const warnings = (await world.events(upgradeEventReason(world.driver))).filter((e) => e.type === 'Warning' && e.message.startsWith('found schedulable'));
    expect(warnings.map((e) => [e.object, e.message.split(',')[0]]).sort()).toEqual(
      states.map((state, i) => [world.nodeNames[i] ?? '', `found schedulable in ${state}`]).sort(),
    );
    expect(warnings.every((e) => e.message.includes(`expected to be held by ${holder}`))).toBe(true);
    // The device pods were evicted (force: bare pods) before each driver restart.
    expect((await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=gpu-work' })).items).toEqual([]);
    expect(watch.violations).toEqual([]);
    const end = await world.nodes();
    expect(end.map((n) => [n.metadata?.name, n.spec?.unschedulable === true, holdersOf(n)])).toEqual(
      world.nodeNames.map((n) => [n, n === admin, undefined]),
    );
  });
});

describe('a cluster-wide NotReady blip, real control plane', () => {
  it('a third of the nodes\' heartbeats stopped mid-rollout: none starts while NotReady, none fails for it (failAfterSeconds 5), the rollout resumes when they return', async () => {
    const world = worlds.create('blip');
    await world.setUp(Array.from({ length: 9 }, () => ({})));
    await world.createDriver('driver:v1');
    await world.createRollout({ upgradePolicy: { maxUnavailable: 3, maxParallelUpgrades: 2, podDeletion: { enable: false }, podRestart: { timeoutSeconds: 600, failAfterSeconds: 5 } } });
    await world.startCoordinator();
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])), HANG_MS);
    await world.bumpDriver('driver:v2');
    // Mid-rollout: as soon as a node upgrades, it and two nodes still waiting lose their heartbeats.
    const upgrading = await world.waitForNodes('a node upgrading', (nodes) => {
      const n = nodes.find((x) => UPGRADING.has(world.stateOf(x)));
      return n?.metadata?.name;
    }, HANG_MS);
    const waiting = (await world.nodes()).filter((n) => world.stateOf(n) === 'upgrade-required').map((n) => n.metadata?.name ?? '').slice(0, 2);
    // The upgrading node last: until the third goes silent the pool is healthy, and a lone NotReady
    // node fails after failAfterSeconds (5 s), which a loaded machine can take to silence two.
    const silent = [...waiting, upgrading];
    // Each node's changes in the order the API server stored them: a start stored on a node whose
    // previous version was NotReady is a start of a NotReady node, whenever the coordinator planned it.
    const previous = new Map<string, V1Node>();
    const startedNotReady = await world.watchNodes((nodes) => {
      let violation: string | undefined;
      for (const n of nodes.values()) {
        const name = n.metadata?.name ?? '';
        const before = previous.get(name);
        if (before !== undefined && before !== n && world.stateOf(before) === 'upgrade-required' && world.stateOf(n) !== 'upgrade-required' && !isNodeReady(before)) {
          violation = `${name} started while NotReady (${world.stateOf(n)})`;
        }
        previous.set(name, n);
      }
      return violation;
    });
    for (const name of silent) await setNodeReady(world, name, false);
    // From the moment every waiting node names the disruption on, no node starts. Each was then
    // last planned by a pass that saw it; a start planned before and not sent yet was revoked by
    // such a pass (coordinator/plan/pending-starts.ts). A start already sent is the informer's lag,
    // not a start during the blip: its node, busy, keeps its old reason until the start is
    // stored, so that moment comes after it.
    const namesDisruption = (n: V1Node): boolean => (n.metadata?.annotations?.[world.keys.upgradeReason] ?? '').startsWith('not started: pool default has 3 of 9 nodes NotReady');
    const seen = await world.waitForNodes('every waiting node to name the disruption', (nodes) => {
      const waitingNow = nodes.filter((n) => world.stateOf(n) === 'upgrade-required');
      return waitingNow.length > 0 && waitingNow.every(namesDisruption) ? nodes : undefined;
    }, HANG_MS);
    const states = new Map([...seen].map((n) => [n.metadata?.name ?? '', world.stateOf(n)]));
    const startedBefore = new Set([...states].filter(([, s]) => s !== 'upgrade-required').map(([n]) => n));

    // Four times failAfterSeconds: a node held NotReady in a healthy pool would have failed by now.
    const violations: string[] = [];
    const watch = await world.watchNodes((nodes) => {
      for (const n of nodes.values()) {
        const name = n.metadata?.name ?? '';
        const state = world.stateOf(n);
        if (state === 'upgrade-failed') return `${name} failed during the blip: ${n.metadata?.annotations?.[world.keys.upgradeReason] ?? ''}`;
        if (!startedBefore.has(name) && state !== 'upgrade-required') return `${name} started during the blip (${state})`;
      }
      return undefined;
    });
    await new Promise((resolve) => setTimeout(resolve, 20_000));
    watch.stop();
    startedNotReady.stop();
    violations.push(...startedNotReady.violations, ...watch.violations);
    expect(violations).toEqual([]);
    // Waiting nodes name the disruption; NotReady nodes held mid-upgrade say their NotReady time fails nothing.
    const during = await world.nodes();
    const reasons = during.map((n) => [world.stateOf(n), n.metadata?.annotations?.[world.keys.upgradeReason] ?? ''] as const);
    const waitingReasons = reasons.filter(([state]) => state === 'upgrade-required');
    expect(waitingReasons.length).toBeGreaterThan(0);
    for (const [, reason] of waitingReasons) expect(reason).toMatch(/^not started: pool default has 3 of 9 nodes NotReady/);
    for (const [state, reason] of reasons.filter(([s]) => s === 'pod-restart-required' || s === 'validation-required' || s === 'uncordon-required')) {
      if (reason.startsWith('node NotReady')) expect(reason, state).toMatch(/its NotReady time fails nothing until the pool is healthy$/);
    }

    for (const name of silent) await setNodeReady(world, name, true);
    await world.waitForNodes('every node upgrade-done after the blip', (nodes) => (nodes.every((n) => world.stateOf(n) === 'upgrade-done') ? true : undefined), HANG_MS);
    expect(await allCurrentAndReady(world, 'driver:v2')).toBe(true);
  });
});
