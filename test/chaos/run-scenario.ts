import { PolicyV1Api, type V1Node, type V1PodSpec } from '@kubernetes/client-node';
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

/** The scenarios that restart a control plane component: they need a control plane of their own. */
export const RESTARTING_SCENARIOS: readonly Scenario[] = ['restart-apiserver', 'restart-etcd'];

/** What a scenario needs of its `full` control plane (the restarts only for RESTARTING_SCENARIOS). */
export type ChaosPlane = Pick<ControlPlane, 'kubeConfig' | 'kubeconfigPath' | 'restartApiServer' | 'restartEtcd'>;

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
  /** kill-coordinator and kill-leader: stop killing after this many (default: until the rollout ends). */
  readonly maxKills?: number;
}

const MONITOR_DAEMONSET = 'monitor';
/** An operand's node label (clients.operandLabels): its DaemonSet's pods leave while the driver restarts. */
const OPERAND_LABEL = 'example.com/chaos-operand';

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
export async function runScenario(plane: ChaosPlane, scenario: Scenario, seed: number, options: ScenarioOptions = {}): Promise<ScenarioResult> {
  const started = Date.now();
  const random = randomFrom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const log = options.log ?? (() => undefined);
  const kc = plane.kubeConfig();
  await installCrd(kc);
  const world = new RolloutWorld(kc, `chaos-${scenario.replace(/[^a-z]/g, '').slice(0, 8)}`);
  const nodeCount = Math.max(3, options.nodes ?? 6);
  await world.setUp(Array.from({ length: nodeCount }, (_, i) => ({ labels: { pool: i % 2 === 0 && i !== nodeCount - 1 ? 'a' : 'b', [OPERAND_LABEL]: 'true' }, unschedulable: i === nodeCount - 1 })));
  const faults: string[] = [];
  let lastFaultAt = Date.now();
  const addFault = (what: string): void => {
    faults.push(what);
    lastFaultAt = Date.now();
  };
  const coordinators: CoordinatorProcess[] = [];
  let serial = 0;
  const lifetimes = new Map<string, { startedAt: number; leaderAt: number | undefined }>();
  /** "up 2.1 s, leader 0.4 s" or "up 2.1 s, never leader": how much a killed coordinator got to do. */
  const lifeOf = (identity: string): string => {
    const life = lifetimes.get(identity);
    if (life === undefined) return '?';
    const now = Date.now();
    const up = `up ${((now - life.startedAt) / 1000).toFixed(1)} s`;
    return life.leaderAt === undefined ? `${up}, never leader` : `${up}, leader ${((now - life.leaderAt) / 1000).toFixed(1)} s`;
  };
  const startCoordinator = (): CoordinatorProcess => {
    serial += 1;
    const p = spawnCoordinator(plane.kubeconfigPath, world.ns.name, `chaos-${serial}`);
    const startedAt = Date.now();
    lifetimes.set(p.identity, { startedAt, leaderAt: undefined });
    p.logged('became leader', 3_600_000).then(() => {
      const life = lifetimes.get(p.identity);
      if (life !== undefined) life.leaderAt = Date.now();
    }, () => undefined);
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
        clients: { operandLabels: [OPERAND_LABEL], timeoutSeconds: 60 },
        ...(scenario === 'stuck-workloads'
          ? { waitForCompletion: { podSelector: 'job=never-ends', timeoutSeconds: 5 }, validation: { podSelector: 'app=validator', timeoutSeconds: 8 } }
          : {}),
      },
      pools: [
        { name: 'a', nodeSelector: { matchLabels: { pool: 'a' } }, maxUnavailable: pick([1, '34%']) },
        // The admin-cordoned node (the last) is in pool b and holds one of its slots for good:
        // pool b allows at least 2, or its other nodes would wait for a slot for ever.
        { name: 'b', nodeSelector: { matchLabels: { pool: 'b' } }, maxUnavailable: pick([2, '67%', '100%']) },
      ],
    };
    await world.createRollout(spec);
    log(`${scenario} seed ${seed}: ${nodeCount} nodes, spec ${JSON.stringify(spec.upgradePolicy)} pools a=${String(spec.pools[0]?.maxUnavailable)} b=${String(spec.pools[1]?.maxUnavailable)}`);
    startCoordinator();
    if (scenario === 'kill-leader') startCoordinator();
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])), 180_000);

    watch = await watchPromises({
      kc,
      nodeSelector: `${TEST_NODE_LABEL}=${world.id}`,
      podNamespaces: [world.ns.name],
      rollout: readRollout({ driverName: world.driver, ...spec }),
      driverDaemonSets: ['driver'],
    });
    await world.bumpDriver('driver:v2');
    const upgradeStarted = Date.now();

    const timeoutMs = options.timeoutMs ?? 300_000;
    const blocked = (nodes: readonly V1Node[]): Set<string> => watch?.blocked(nodes) ?? new Set();
    const done = waitForEnd(world, () => Math.max(upgradeStarted, lastFaultAt) + timeoutMs, blocked, log);
    let finished = false;
    void done.then(() => {
      finished = true;
    }, () => {
      finished = true;
    });
    await injectFaults({ scenario, plane, maxKills: options.maxKills ?? Infinity, world, random, faults, addFault, coordinators, startCoordinator, lifeOf, isFinished: () => finished, forgetNode: (n) => watch?.forgetNode(n) });
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

/**
 * Every node of the world upgrade-done on driver:v2, upgrade-failed, or blocked by its pool's
 * limit through failed or admin-cordoned nodes (the observer's blockedByLimit), by `deadline()`: the
 * scenario's bound counted from the upgrade's start or the last fault, whichever is later (a
 * killed coordinator's successor takes tens of seconds to start on a loaded machine, so a bound
 * from the start alone measures the kills, not the rollout).
 */
async function waitForEnd(world: RolloutWorld, deadline: () => number, blocked: (nodes: readonly V1Node[]) => Set<string>, log: (line: string) => void): Promise<void> {
  const begun = Date.now();
  let last = '';
  for (;;) {
    try {
      const nodes = await world.nodes();
      const pods = await world.driverPods();
      const states = nodes.map((n) => `${n.metadata?.name?.slice(-2) ?? ''}:${world.stateOf(n)}`);
      const now = states.join(' ');
      if (now !== last) log(`  +${((Date.now() - begun) / 1000).toFixed(1)} s ${now}`);
      last = now;
      const stuck = blocked(nodes);
      const settled = nodes.every((n) => {
        const state = world.stateOf(n);
        if (state === 'upgrade-failed' || stuck.has(n.metadata?.name ?? '')) return true;
        const pod = pods.find((p) => p.spec?.nodeName === n.metadata?.name && p.metadata?.deletionTimestamp === undefined);
        return state === 'upgrade-done' && pod?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pod);
      });
      if (settled) return;
    } catch {
      // The API server may be down for a moment (a fault): try again.
    }
    if (Date.now() > deadline()) throw new Error(`after ${((Date.now() - begun) / 1000).toFixed(0)} s: ${last}`);
    await sleep(500);
  }
}

interface FaultContext {
  readonly scenario: Scenario;
  readonly plane: ChaosPlane;
  readonly maxKills: number;
  readonly world: RolloutWorld;
  readonly random: () => number;
  readonly faults: readonly string[];
  /** Records a fault (and its time: the rollout's bound counts from the last one). */
  addFault(what: string): void;
  readonly coordinators: CoordinatorProcess[];
  startCoordinator(): CoordinatorProcess;
  lifeOf(identity: string): string;
  isFinished(): boolean;
  forgetNode(name: string): void;
}

/**
 * Longest wait for a coordinator to take the lease before it is killed anyway: a `nice`d
 * coordinator took 50–100 s to start and lead on this 2-core machine at load 28.
 */
const LEADING_WAIT_MS = 180_000;

const between = async (random: () => number, minMs: number, maxMs: number): Promise<void> => {
  await sleep(minMs + Math.floor(random() * (maxMs - minMs)));
};

/** Each scenario's faults, injected until the rollout ends (or the scenario's own list is done). */
const INJECT: Readonly<Record<Scenario, (ctx: FaultContext) => Promise<void>>> = {
  // Mostly a leader at a random moment of its first 4 s of leading (a coordinator killed while
  // it starts does nothing, and killing every one before it leads stalls the rollout: a
  // coordinator takes several seconds to start and take the lease on a loaded machine); one kill
  // in five at a random moment of its start.
  'kill-coordinator': async (ctx) => {
    for (let kills = 0; kills < ctx.maxKills && !ctx.isFinished(); kills += 1) {
      const victim = ctx.coordinators.find((c) => c.isRunning());
      if (victim === undefined) break;
      // Waits at most LEADING_WAIT_MS (then it is killed anyway), or until the process exits.
      if (ctx.random() >= 0.2) await victim.logged('became leader', LEADING_WAIT_MS).catch(() => undefined);
      await between(ctx.random, 300, 4_000);
      if (ctx.isFinished()) break;
      const life = ctx.lifeOf(victim.identity);
      await victim.kill('SIGKILL');
      ctx.addFault(`SIGKILL ${victim.identity} (${life})`);
      ctx.startCoordinator();
    }
  },
  // Two replicas; the lease holder killed while a node is between wait-for-jobs and drain when
  // one is (polled for 10 s), so the standby takes over mid-drain.
  'kill-leader': async (ctx) => {
    let kills = 0;
    while (kills < ctx.maxKills && !ctx.isFinished()) {
      await between(ctx.random, 1_000, 5_000);
      const draining = await untilDraining(ctx);
      const holder = await leaseHolder(ctx.world.kc, ctx.world.ns.name).catch(() => undefined);
      const victim = ctx.coordinators.find((c) => c.isRunning() && c.identity === holder);
      if (victim === undefined || ctx.isFinished()) continue;
      const life = ctx.lifeOf(victim.identity);
      await victim.kill('SIGKILL');
      ctx.addFault(`SIGKILL leader ${victim.identity} (${life}${draining === undefined ? '' : `, ${draining} draining`})`);
      kills += 1;
      ctx.startCoordinator();
    }
  },
  'restart-apiserver': async (ctx) => {
    await between(ctx.random, 1_000, 6_000);
    await ctx.plane.restartApiServer();
    ctx.addFault('restart kube-apiserver');
  },
  'restart-etcd': async (ctx) => {
    await between(ctx.random, 1_000, 6_000);
    await ctx.plane.restartEtcd();
    ctx.addFault('restart etcd');
  },
  'conflicting-edits': conflictingEdits,
  'node-churn': nodeChurn,
  'stuck-workloads': (ctx) => {
    ctx.addFault('PDB never allowing eviction, job pod never finishing, validator never Ready (set up before the upgrade)');
    return Promise.resolve();
  },
};

const DRAINING = new Set(['wait-for-jobs-required', 'pod-deletion-required', 'drain-required']);

/** The first node seen between wait-for-jobs and drain (polled for up to 10 s), or undefined. */
async function untilDraining(ctx: FaultContext): Promise<string | undefined> {
  for (let i = 0; i < 50 && !ctx.isFinished(); i += 1) {
    const nodes = await ctx.world.nodes().catch(() => []);
    const node = nodes.find((n) => DRAINING.has(ctx.world.stateOf(n)));
    if (node !== undefined) return `${node.metadata?.name ?? '?'} ${ctx.world.stateOf(node)}`;
    await sleep(200);
  }
  return undefined;
}

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
      ctx.addFault(`user moved ${relabel} to pool ${pool} (state ${node === undefined ? '?' : world.stateOf(node)})`);
      relabelled = true;
    }
    await between(random, 50, 300);
  }
  ctx.addFault(`${edits} conflicting label/annotation edits`);
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
  ctx.addFault(`deleted node ${name} in ${victim === undefined ? '?' : world.stateOf(victim)}`);
  await between(random, 500, 3_000);
  const added = `${world.id}-new`;
  await createFakeNodes(world.kc, [{ name: added, labels: { pool: 'a', [OPERAND_LABEL]: 'true', [TEST_NODE_LABEL]: world.id } }]);
  world.nodeNames.push(added);
  ctx.addFault(`added node ${added}`);
}

/**
 * Pods the policy names (workload=true, evictable; an operand DaemonSet's pods, which leave while
 * the driver restarts; for stuck-workloads one behind a PDB that never allows an eviction, a job
 * pod that never ends, validators that never turn Ready) and pods it must never remove (a
 * DaemonSet's pod on every node, a drain-skip pod).
 */
async function createProtectedPods(world: RolloutWorld, stuck: boolean): Promise<void> {
  const [first, second, third] = world.nodeNames;
  for (const [i, name] of world.nodeNames.entries()) await world.createPod(name, `work-${i}`);
  await world.createPod(first ?? '', 'skip-me', { labels: { workload: 'true', [world.keys.drainSkip]: 'true' } });
  await createDaemonSet(world, MONITOR_DAEMONSET, { workload: 'true' }, {}, {});
  await createDaemonSet(world, 'operand', {}, { [OPERAND_LABEL]: 'true' }, { terminationGracePeriodSeconds: 0 });
  if (!stuck) return;
  await world.createPod(second ?? '', 'guarded', { labels: { guard: 'all' } });
  await world.kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
    namespace: world.ns.name,
    body: { metadata: { name: 'never' }, spec: { maxUnavailable: 0, selector: { matchLabels: { guard: 'all' } } } },
  });
  await world.createPod(third ?? '', 'training', { labels: { job: 'never-ends' } });
  await createDaemonSet(world, 'validator', {}, { pool: 'b' }, { readinessGates: [{ conditionType: 'example.com/validated' }] });
}

/** A DaemonSet `name` (pods labelled app=<name> and `labels`) on the world's nodes that match `nodeSelector`, tolerating every taint. */
async function createDaemonSet(world: RolloutWorld, name: string, labels: Record<string, string>, nodeSelector: Record<string, string>, pod: Partial<V1PodSpec>): Promise<void> {
  await world.apps.createNamespacedDaemonSet({
    namespace: world.ns.name,
    body: {
      metadata: { name },
      spec: {
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name, ...labels } },
          spec: { nodeSelector: { [TEST_NODE_LABEL]: world.id, ...nodeSelector }, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'c', image: `${name}:v1` }], ...pod },
        },
      },
    },
  });
}
