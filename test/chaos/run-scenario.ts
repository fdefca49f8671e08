import { AppsV1Api, PolicyV1Api, type V1Node } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import type { ControlPlane } from '../bed/control-plane.ts';
import { createFakeNodes } from '../bed/fake-nodes.ts';
import { leaseHolder, spawnCoordinator, type CoordinatorProcess } from '../integration/coordinator/coordinator-process.ts';
import { installCrd, isPodReady, RolloutWorld, TEST_NODE_LABEL } from '../integration/coordinator/harness.ts';
import { readRollout } from '../observer/rollout-promises.ts';
import { randomFrom } from '../unit/coordinator/plan/simulate.ts';
import { watchPromises } from './watch-promises.ts';

export const SCENARIOS = [
  'kill-coordinator',
  'kill-leader',
  'restart-apiserver',
  'restart-etcd',
  'conflicting-edits',
  'node-churn',
  'stuck-workloads',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface ScenarioResult {
  readonly scenario: Scenario;
  readonly seed: number;
  readonly seconds: number;
  /** Each fault injected, in order ("SIGKILL coordinator-3", "restart etcd", ...). */
  readonly faults: readonly string[];
  /** Changes the observer checked. */
  readonly checks: number;
  readonly violations: readonly string[];
}

export interface ScenarioOptions {
  /** How long the rollout may take before "did not complete" is a violation. */
  readonly timeoutMs?: number;
  /** Writes a progress line. */
  readonly log?: (line: string) => void;
  /** Nodes in the world (6 by default; the last one admin-cordoned). */
  readonly nodes?: number;
}

const MONITOR_DAEMONSET = 'monitor';
const DRAIN_SELECTOR = { matchLabels: { workload: 'true' } };

/**
 * One chaos run on `plane` (profile `full`): a fresh world of KWOK nodes in two pools with
 * workloads (evictable pods, a DaemonSet's pods and a drain-skip pod the policy must never touch,
 * an admin-cordoned node), a DriverRollout with limits drawn from `seed`, the real coordinator
 * as separate processes, and a driver upgrade, while `scenario`'s faults are injected at moments
 * drawn from `seed`. The observer checks the promises on every change; at the end every node must
 * be upgrade-done, or upgrade-failed with a reason. Everything random comes from `seed`, so a
 * failing run replays (timings aside: the faults land at the same offsets, the cluster's own
 * pace may differ).
 */
export async function runScenario(plane: ControlPlane, scenario: Scenario, seed: number, options: ScenarioOptions = {}): Promise<ScenarioResult> {
  const started = Date.now();
  const random = randomFrom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const log = options.log ?? (() => undefined);
  const kc = plane.kubeConfig();
  await installCrd(kc);
  const world = new RolloutWorld(kc, `chaos-${scenario.replace(/[^a-z]/g, '').slice(0, 8)}`);
  const nodeCount = Math.max(3, options.nodes ?? 6);
  await world.setUp(Array.from({ length: nodeCount }, (_, i) => ({ labels: { pool: i % 2 === 0 ? 'a' : 'b' }, unschedulable: i === nodeCount - 1 })));
  const faults: string[] = [];
  const coordinators: CoordinatorProcess[] = [];
  let serial = 0;
  const startCoordinator = (): CoordinatorProcess => {
    serial += 1;
    const p = spawnCoordinator(plane.kubeconfigPath, world.ns.name, `chaos-${serial}`);
    coordinators.push(p);
    return p;
  };
  let watch: Awaited<ReturnType<typeof watchPromises>> | undefined;
  try {
    await world.createDriver('driver:v1');
    await createProtectedPods(world, scenario === 'stuck-workloads');
    const spec = {
      upgradePolicy: {
        maxUnavailable: pick([1, 2, '34%', '50%']),
        maxParallelUpgrades: pick([0, 1, 2]),
        drain: { enable: true, force: true, timeoutSeconds: 15, podSelector: 'workload=true' },
        ...(scenario === 'stuck-workloads'
          ? { waitForCompletion: { podSelector: 'job=never-ends', timeoutSeconds: 5 }, validation: { podSelector: 'app=validator', timeoutSeconds: 8 } }
          : {}),
      },
      pools: [
        { name: 'a', nodeSelector: { matchLabels: { pool: 'a' } }, maxUnavailable: pick([1, '34%']) },
        { name: 'b', nodeSelector: { matchLabels: { pool: 'b' } } },
      ],
    };
    await world.createRollout(spec);
    log(`${scenario} seed ${seed}: ${nodeCount} nodes, spec ${JSON.stringify(spec.upgradePolicy)} pools a=${String(spec.pools[0]?.maxUnavailable)}`);
    startCoordinator();
    if (scenario === 'kill-leader') startCoordinator();
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])), 180_000);

    watch = await watchPromises({
      kc,
      nodeSelector: `${TEST_NODE_LABEL}=${world.id}`,
      podNamespaces: [world.ns.name],
      rollout: readRollout({ driverName: world.driver, ...spec }),
      driverDaemonSets: ['driver'],
      drainSelector: DRAIN_SELECTOR,
    });
    await world.bumpDriver('driver:v2');

    const done = waitForEnd(world, options.timeoutMs ?? 300_000);
    let finished = false;
    void done.then(() => {
      finished = true;
    }, () => {
      finished = true;
    });
    await injectFaults({ scenario, plane, world, random, faults, coordinators, startCoordinator, isFinished: () => finished, forgetNode: (n) => watch?.forgetNode(n) });
    // A killed coordinator must have a successor for the rollout to finish.
    if (!coordinators.some((c) => c.isRunning())) startCoordinator();
    const ended = await done.then(() => undefined, (error: unknown) => (error instanceof Error ? error.message : String(error)));
    const violations = [...watch.violations];
    if (ended !== undefined) violations.push(`did not complete: ${ended}`);
    violations.push(...(await watch.checkSettled()));
    return { scenario, seed, seconds: (Date.now() - started) / 1000, faults, checks: watch.checks(), violations };
  } finally {
    watch?.stop();
    await Promise.all(coordinators.map((c) => c.kill('SIGKILL')));
    await world.tearDown().catch(() => undefined);
  }
}

/** Every node of the world upgrade-done on driver:v2, or upgrade-failed. */
async function waitForEnd(world: RolloutWorld, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const nodes = await world.nodes();
      const pods = await world.driverPods();
      const states = nodes.map((n) => `${n.metadata?.name?.slice(-2) ?? ''}:${world.stateOf(n)}`);
      last = states.join(' ');
      const settled = nodes.every((n) => {
        const state = world.stateOf(n);
        if (state === 'upgrade-failed') return true;
        const pod = pods.find((p) => p.spec?.nodeName === n.metadata?.name && p.metadata?.deletionTimestamp === undefined);
        return state === 'upgrade-done' && pod?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pod);
      });
      if (settled) return;
    } catch {
      // The API server may be down for a moment (a fault): try again.
    }
    if (Date.now() > deadline) throw new Error(`after ${timeoutMs / 1000} s: ${last}`);
    await sleep(500);
  }
}

interface FaultContext {
  readonly scenario: Scenario;
  readonly plane: ControlPlane;
  readonly world: RolloutWorld;
  readonly random: () => number;
  readonly faults: string[];
  readonly coordinators: CoordinatorProcess[];
  startCoordinator(): CoordinatorProcess;
  isFinished(): boolean;
  forgetNode(name: string): void;
}

const between = async (random: () => number, minMs: number, maxMs: number): Promise<void> => {
  await sleep(minMs + Math.floor(random() * (maxMs - minMs)));
};

/** Each scenario's faults, injected until the rollout ends (or the scenario's own list is done). */
const INJECT: Readonly<Record<Scenario, (ctx: FaultContext) => Promise<void>>> = {
  'kill-coordinator': async (ctx) => {
    while (!ctx.isFinished()) {
      await between(ctx.random, 300, 4_000);
      const victim = ctx.coordinators.find((c) => c.isRunning());
      if (victim === undefined || ctx.isFinished()) break;
      await victim.kill('SIGKILL');
      ctx.faults.push(`SIGKILL ${victim.identity}`);
      ctx.startCoordinator();
    }
  },
  'kill-leader': async (ctx) => {
    while (!ctx.isFinished()) {
      await between(ctx.random, 1_000, 5_000);
      const holder = await leaseHolder(ctx.world.kc, ctx.world.ns.name).catch(() => undefined);
      const victim = ctx.coordinators.find((c) => c.isRunning() && c.identity === holder);
      if (victim === undefined || ctx.isFinished()) continue;
      await victim.kill('SIGKILL');
      ctx.faults.push(`SIGKILL leader ${victim.identity}`);
      ctx.startCoordinator();
    }
  },
  'restart-apiserver': async (ctx) => {
    await between(ctx.random, 1_000, 6_000);
    await ctx.plane.restartApiServer();
    ctx.faults.push('restart kube-apiserver');
  },
  'restart-etcd': async (ctx) => {
    await between(ctx.random, 1_000, 6_000);
    await ctx.plane.restartEtcd();
    ctx.faults.push('restart etcd');
  },
  'conflicting-edits': conflictingEdits,
  'node-churn': nodeChurn,
  'stuck-workloads': (ctx) => {
    ctx.faults.push('PDB never allowing eviction, job pod never finishing, validator never Ready (set up before the upgrade)');
    return Promise.resolve();
  },
};

async function injectFaults(ctx: FaultContext): Promise<void> {
  await INJECT[ctx.scenario](ctx);
}

/** Another client writes the same nodes all along; a user moves a node to the other pool by hand. */
async function conflictingEdits(ctx: FaultContext): Promise<void> {
  const { world, random } = ctx;
  let edits = 0;
  const relabel = world.nodeNames[Math.floor(random() * (world.nodeNames.length - 1))] ?? '';
  let relabelled = false;
  while (!ctx.isFinished()) {
    const name = world.nodeNames[Math.floor(random() * world.nodeNames.length)] ?? '';
    await world.core
      .patchNode({ name, body: { metadata: { labels: { 'example.com/edited': String(edits) }, annotations: { 'example.com/touch': String(Date.now()) } } } }, MERGE_PATCH)
      .then(() => (edits += 1), () => undefined);
    if (!relabelled && edits > 10) {
      const node = (await world.nodes()).find((n) => n.metadata?.name === relabel);
      const pool = node?.metadata?.labels?.pool === 'a' ? 'b' : 'a';
      await world.core.patchNode({ name: relabel, body: { metadata: { labels: { pool } } } }, MERGE_PATCH).catch(() => undefined);
      ctx.faults.push(`user moved ${relabel} to pool ${pool} (state ${node === undefined ? '?' : world.stateOf(node)})`);
      relabelled = true;
    }
    await between(random, 50, 300);
  }
  ctx.faults.push(`${edits} conflicting label/annotation edits`);
}

/** A node deleted mid-upgrade, then a node added mid-rollout. */
async function nodeChurn(ctx: FaultContext): Promise<void> {
  const { world, random } = ctx;
  await between(random, 1_000, 4_000);
  const nodes = await world.nodes();
  const victim: V1Node | undefined = nodes.find((n) => !['upgrade-done', 'upgrade-required', 'unknown'].includes(world.stateOf(n)) && n.spec?.unschedulable !== true) ?? nodes[0];
  const name = victim?.metadata?.name ?? '';
  ctx.forgetNode(name);
  await world.core.deleteNode({ name });
  world.nodeNames = world.nodeNames.filter((n) => n !== name);
  ctx.faults.push(`deleted node ${name} in ${victim === undefined ? '?' : world.stateOf(victim)}`);
  await between(random, 500, 3_000);
  const added = `${world.id}-new`;
  await createFakeNodes(world.kc, [{ name: added, labels: { pool: 'a', [TEST_NODE_LABEL]: world.id } }]);
  world.nodeNames.push(added);
  ctx.faults.push(`added node ${added}`);
}

/**
 * Pods the policy names (workload=true, evictable; for stuck-workloads one behind a PDB that never
 * allows an eviction, a job pod that never ends, validators that never turn Ready) and pods it
 * must never remove (a DaemonSet's pod on every node, a drain-skip pod).
 */
async function createProtectedPods(world: RolloutWorld, stuck: boolean): Promise<void> {
  const [first, second, third] = world.nodeNames;
  for (const [i, name] of world.nodeNames.entries()) await world.createPod(name, `work-${i}`);
  await world.createPod(first ?? '', 'skip-me', { labels: { workload: 'true', [world.keys.drainSkip]: 'true' } });
  await world.apps.createNamespacedDaemonSet({
    namespace: world.ns.name,
    body: {
      metadata: { name: MONITOR_DAEMONSET },
      spec: {
        selector: { matchLabels: { app: MONITOR_DAEMONSET } },
        template: {
          metadata: { labels: { app: MONITOR_DAEMONSET, workload: 'true' } },
          spec: { nodeSelector: { [TEST_NODE_LABEL]: world.id }, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'm', image: 'monitor:v1' }] },
        },
      },
    },
  });
  if (!stuck) return;
  await world.createPod(second ?? '', 'guarded', { labels: { guard: 'all' } });
  await world.kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
    namespace: world.ns.name,
    body: { metadata: { name: 'never' }, spec: { maxUnavailable: 0, selector: { matchLabels: { guard: 'all' } } } },
  });
  await world.createPod(third ?? '', 'training', { labels: { job: 'never-ends' } });
  await world.kc.makeApiClient(AppsV1Api).createNamespacedDaemonSet({
    namespace: world.ns.name,
    body: {
      metadata: { name: 'validator' },
      spec: {
        selector: { matchLabels: { app: 'validator' } },
        template: {
          metadata: { labels: { app: 'validator' } },
          spec: {
            nodeSelector: { [TEST_NODE_LABEL]: world.id, pool: 'b' },
            tolerations: [{ operator: 'Exists' }],
            readinessGates: [{ conditionType: 'example.com/validated' }],
            containers: [{ name: 'v', image: 'validator:v1' }],
          },
        },
      },
    },
  });
}
