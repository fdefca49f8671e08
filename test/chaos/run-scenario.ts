import { PolicyV1Api, type V1Node } from '@kubernetes/client-node';
import { mkdtemp, rm } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProcessKubelet } from '../../demo/process-kubelet.ts';
import { MERGE_PATCH, STRATEGIC_MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { KUBELET_STOPPED_ANNOTATION, type ControlPlane } from '../bed/control-plane.ts';
import { createFakeNodes } from '../bed/fake-nodes.ts';
import { AgentDriver } from '../integration/coordinator/agent-driver.ts';
import { leaseHolder, spawnCoordinator, type CoordinatorProcess } from '../integration/coordinator/coordinator-process.ts';
import { installCrd, isPodReady, RolloutWorld, TEST_NODE_LABEL } from '../integration/coordinator/harness.ts';
import { createNodeDaemonSet } from '../integration/coordinator/operand-daemonset.ts';
import { randomFrom } from '../unit/coordinator/plan/simulate.ts';
import { watchPromises, type PromiseWatch } from './watch-promises.ts';
import { NO_SECOND_RELEASE, SECOND_RELEASE_IDENTITY, secondReleaseBeside, watchWorldPromises, type ReleaseEnd } from './second-release.ts';
import { shortNodeName } from './short-node-name.ts';

export const SCENARIOS = [
  'kill-coordinator',
  'kill-leader',
  'restart-apiserver',
  'restart-etcd',
  'conflicting-edits',
  'node-churn',
  'node-not-ready',
  'stuck-workloads',
  'crash-looping-agent',
  'agents-killed',
  'two-releases',
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
  /** Every node at the end: its upgrade state and reason annotation. */
  readonly final: readonly NodeEnd[];
  /** two-releases: every node at the end, in the second release's driver. */
  readonly secondFinal?: readonly ReleaseEnd[];
}

/** A node at the end of a run. */
export interface NodeEnd {
  readonly node: string;
  readonly state: string;
  readonly reason: string;
  readonly ready: boolean;
}

/** What a scenario's fault must have led to, judged on the nodes' ends: a problem, or null. */
export type OutcomeCheck = (final: readonly NodeEnd[]) => string | null;

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
/** The device resource the workloads request: pod deletion (on by default) evicts them. */
const DEVICE_RESOURCE = 'nvidia.com/gpu';
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
  // Real agents compile and load the sample driver on every node: three nodes are enough for them.
  const nodeCount = scenario === 'agents-killed' ? 3 : Math.max(3, options.nodes ?? 6);
  await world.setUp(Array.from({ length: nodeCount }, (_, i) => ({ labels: { pool: i % 2 === 0 && i !== nodeCount - 1 ? 'a' : 'b', [OPERAND_LABEL]: 'true' }, unschedulable: i === nodeCount - 1 })));
  // two-releases: a second chart release (namespace, driver, DriverRollout, coordinator) on the same nodes.
  const second = scenario === 'two-releases' ? await secondReleaseBeside(world, chaosSpec(scenario, pick)) : NO_SECOND_RELEASE;
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
  const startCoordinator = (release: RolloutWorld = world): CoordinatorProcess => {
    serial += 1;
    const p = spawnCoordinator(plane.kubeconfigPath, release.ns.name, `${release === world ? 'chaos-' : SECOND_RELEASE_IDENTITY}${serial}`);
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
    // agents-killed: the real init container and agent (process kubelet, restarts with back-off); else KWOK's stand-in.
    const agents = scenario === 'agents-killed' ? await AgentDriver.start(world, { kubeconfigPath: plane.kubeconfigPath, restart: AGENT_RESTART, cacheDir: chaosModuleCache() }) : undefined;
    if (agents === undefined) await world.createDriver('driver:v1');
    else await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: agents.daemonSet('1.0.0', await agents.source('1.0.0'), {}, { safeLoadGate: true }) });
    await createProtectedPods(world, scenario === 'stuck-workloads');
    const spec = chaosSpec(scenario, pick);
    await world.createRollout(spec);
    log(`${scenario} seed ${seed}: ${nodeCount} nodes, spec ${JSON.stringify(spec.upgradePolicy)} pools a=${String(spec.pools[0]?.maxUnavailable)} b=${String(spec.pools[1]?.maxUnavailable)}`);
    await second.install(startCoordinator, log);
    startCoordinator();
    if (scenario === 'kill-leader') startCoordinator();
    // With real agents the first install waits for safe load and (once, then cached) two kbuilds.
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])), agents === undefined ? 180_000 : 900_000).catch(async (error: unknown) => {
      throw new Error(`the first install did not finish${agents === undefined ? '' : `; agent logs:\n${await agents.logs()}`}`, { cause: error });
    });
    await second.installed();

    watch = await watchWorldPromises(kc, world, spec);
    await second.upgrade(kc);
    const newImage = await upgradeDriver(scenario, world, agents, plane.kubeconfigPath);
    const upgradeStarted = Date.now();

    // The crash loop needs 11 agent starts, each a Node start with its config modules (about 12 s
    // apiece at load 20 on 2 cores): at least 8 minutes for it, a bound that only catches a hang.
    const timeoutMs = Math.max(options.timeoutMs ?? 300_000, scenario === 'crash-looping-agent' ? 480_000 : 0);
    const blocked = (nodes: readonly V1Node[]): Set<string> => watch?.blocked(nodes) ?? new Set();
    const deadline = (): number => Math.max(upgradeStarted, lastFaultAt) + timeoutMs;
    const done = Promise.all([waitForEnd(world, newImage, deadline, blocked, log), ...second.ends(waitForEnd, deadline, log)]);
    let finished = false;
    void done.then(() => {
      finished = true;
    }, () => {
      finished = true;
    });
    const ended = done.then(() => undefined, () => undefined);
    const outcomes: OutcomeCheck[] = [];
    const expectEnd = (check: OutcomeCheck): void => {
      outcomes.push(check);
    };
    await injectFaults({ scenario, plane, maxKills: options.maxKills ?? Infinity, world, random, faults, addFault, expectEnd, coordinators, startCoordinator, lifeOf, isFinished: () => finished, ended, watch, agents, second: second.faultView });
    // A killed coordinator must have a successor for the rollout to finish (each release its own).
    if (!coordinators.some((c) => c.isRunning() && !c.identity.startsWith(SECOND_RELEASE_IDENTITY))) startCoordinator();
    second.keepCoordinator(coordinators, startCoordinator);
    const missed = await done.then(() => undefined, (error: unknown) => (error instanceof Error ? error.message : String(error)));
    const violations = [...watch.violations];
    if (missed !== undefined) violations.push(`did not complete: ${missed}`);
    violations.push(...(await watch.checkSettled()));
    violations.push(...(await second.violations()));
    const final = await nodeEnds(world);
    for (const check of outcomes) {
      const problem = check(final);
      if (problem !== null) violations.push(`outcome: ${problem}`);
    }
    return { scenario, seed, seconds: (Date.now() - started) / 1000, faults, checks: watch.checks() + second.checks(), violations, final, ...(await second.final()) };
  } finally {
    watch?.stop();
    second.stop();
    await Promise.all(coordinators.map((c) => c.kill('SIGKILL')));
    await second.tearDown().catch(() => undefined);
    await world.tearDown().catch(() => undefined);
  }
}

/** Every node of the world at the end, in the world's driver. */
async function nodeEnds(world: RolloutWorld): Promise<NodeEnd[]> {
  return (await world.nodes()).map((n) => ({
    node: n.metadata?.name ?? '',
    state: world.stateOf(n),
    reason: n.metadata?.annotations?.[world.keys.upgradeReason] ?? '',
    ready: n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True',
  }));
}

/** The DriverRollout's spec for `scenario`, its limits drawn with `pick`. */
function chaosSpec(scenario: Scenario, pick: <T>(items: readonly T[]) => T) {
  return {
    upgradePolicy: {
      maxUnavailable: pick([1, 2, '34%', '50%']),
      // Crash loop: one node per pool at a time, so the agents' restarts (each a Node start) fit a loaded 2-core machine.
      maxParallelUpgrades: scenario === 'crash-looping-agent' ? 1 : pick([0, 1, 2]),
      // The workloads use the device (nvidia.com/gpu): pod deletion evicts them (bare pods: force),
      // and a pod it cannot evict in 20 s (the PDB that never allows it) goes on to the drain.
      podDeletion: { force: true, timeoutSeconds: 20 },
      drain: { enable: true, force: true, timeoutSeconds: 15, podSelector: 'workload=true' },
      clients: { operandLabels: [OPERAND_LABEL], timeoutSeconds: 60 },
      ...(scenario === 'stuck-workloads'
        ? { waitForCompletion: { podSelector: 'job=never-ends', timeoutSeconds: 5 }, validation: { podSelector: 'app=validator', timeoutSeconds: 8 } }
        : {}),
      // A node NotReady for good fails 30 s after it went NotReady (node-not-ready.ts), not after 2 minutes.
      ...(scenario === 'node-not-ready' ? { podRestart: { timeoutSeconds: 60, failAfterSeconds: NOT_READY_FAIL_AFTER_S } } : {}),
      // The crash loop must end on the restart rule (more than 10 restarts), not on the timeout: the
      // agent reports nothing before it exits, so only timeoutSeconds competes, and 600 s is far
      // beyond the run's own bound.
      ...(scenario === 'crash-looping-agent' ? { podRestart: { timeoutSeconds: 600, failAfterSeconds: 30 } } : {}),
    },
    ...(scenario === 'crash-looping-agent' ? { maxFailedNodes: 1 } : {}),
    pools: [
      { name: 'a', nodeSelector: { matchLabels: { pool: 'a' } }, maxUnavailable: pick([1, '34%']) },
      // The admin-cordoned node (the last) is in pool b and holds one of its slots for good:
      // pool b allows at least 2, or its other nodes would wait for a slot for ever.
      { name: 'b', nodeSelector: { matchLabels: { pool: 'b' } }, maxUnavailable: pick([2, '67%', '100%']) },
    ],
  };
}

/** Driver v2 for the scenario (the crash-looping agent, the real agent 2.0.0, or KWOK's `driver:v2`); the image its pods run. */
async function upgradeDriver(scenario: Scenario, world: RolloutWorld, agents: AgentDriver | undefined, kubeconfigPath: string): Promise<string> {
  if (scenario === 'crash-looping-agent') {
    await crashLoopingDriver(world, kubeconfigPath);
    return 'driver:v2';
  }
  if (agents === undefined) {
    await world.bumpDriver('driver:v2');
    return 'driver:v2';
  }
  await world.apps.replaceNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body: agents.daemonSet('2.0.0', await agents.source('2.0.0'), {}, { safeLoadGate: true }) });
  return 'driver-rollout/agent:2.0.0';
}

/**
 * Every node of the world upgrade-done on `image`, upgrade-failed, or blocked by its pool's
 * limit through failed or admin-cordoned nodes (the observer's blockedByLimit), by `deadline()`: the
 * scenario's bound counted from the upgrade's start or the last fault, whichever is later (a
 * killed coordinator's successor takes tens of seconds to start on a loaded machine, so a bound
 * from the start alone measures the kills, not the rollout).
 */
async function waitForEnd(world: RolloutWorld, image: string, deadline: () => number, blocked: (nodes: readonly V1Node[]) => Set<string>, log: (line: string) => void): Promise<void> {
  const begun = Date.now();
  let last = '';
  for (;;) {
    try {
      const nodes = await world.nodes();
      const pods = await world.driverPods();
      // With the container restarts of the node's driver pod, when it has any (crash loop, killed agents).
      const states = nodes.map((n) => {
        const pod = pods.find((p) => p.spec?.nodeName === n.metadata?.name && p.metadata?.deletionTimestamp === undefined);
        const restarts = Math.max(0, ...[...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])].map((c) => c.restartCount));
        return `${shortNodeName(n.metadata?.name ?? '')}:${world.stateOf(n)}${restarts > 0 ? ` (${restarts} restarts)` : ''}`;
      });
      const now = states.join(' ');
      if (now !== last) log(`  +${((Date.now() - begun) / 1000).toFixed(1)} s ${now}`);
      last = now;
      const stuck = blocked(nodes);
      const settled = nodes.every((n) => {
        const state = world.stateOf(n);
        if (state === 'upgrade-failed' || stuck.has(n.metadata?.name ?? '')) return true;
        const pod = pods.find((p) => p.spec?.nodeName === n.metadata?.name && p.metadata?.deletionTimestamp === undefined);
        return state === 'upgrade-done' && pod?.spec?.containers[0]?.image === image && isPodReady(pod);
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
  /** What the fault must have led to by the end (checked on the nodes' ends; a problem is a violation). */
  expectEnd(check: OutcomeCheck): void;
  readonly coordinators: CoordinatorProcess[];
  /** Starts a coordinator of the world's release, or of `release` (two-releases: the second). */
  startCoordinator(release?: RolloutWorld): CoordinatorProcess;
  lifeOf(identity: string): string;
  isFinished(): boolean;
  /** Resolves when the rollout has ended (or missed its bound). */
  readonly ended: Promise<void>;
  /** The observer's watch: the nodes' states and the rollout's progress. */
  readonly watch: PromiseWatch;
  /** agents-killed: the real agents and init containers. */
  readonly agents: AgentDriver | undefined;
  /** two-releases: the second release's world and its observer. */
  readonly second: { readonly world: RolloutWorld; readonly watch: PromiseWatch } | undefined;
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
  // Mostly a leader, after 1–3 further state changes of the rollout once it leads (plus up to
  // 0.5 s): a kill keyed to the rollout's progress lands mid-rollout however fast or slow the
  // machine is (a coordinator killed while it starts does nothing, and killing every one before
  // it leads stalls the rollout); one kill of a successor in five at a random moment of its start.
  'kill-coordinator': async (ctx) => {
    for (let kills = 0; kills < ctx.maxKills && !ctx.isFinished(); kills += 1) {
      const victim = ctx.coordinators.find((c) => c.isRunning());
      if (victim === undefined) break;
      // The first victim has led since the install: always the leader path.
      if (kills === 0 || ctx.random() >= 0.2) {
        // Waits at most LEADING_WAIT_MS (then it is killed anyway), or until the process exits.
        await victim.logged('became leader', LEADING_WAIT_MS).catch(() => undefined);
        await afterTransitions(ctx, 1 + Math.floor(ctx.random() * 3));
        await between(ctx.random, 0, 500);
      } else {
        await between(ctx.random, 300, 4_000);
      }
      if (ctx.isFinished()) break;
      const life = ctx.lifeOf(victim.identity);
      const states = inFlight(ctx);
      await victim.kill('SIGKILL');
      ctx.addFault(`SIGKILL ${victim.identity} (${life}${states})`);
      ctx.startCoordinator();
    }
  },
  // Two replicas; the lease holder killed the moment a node is between wait-for-jobs and drain
  // (seen on the node watch; 30 s at most), so the standby takes over mid-drain; the next kill
  // only after the successor has moved the rollout on.
  'kill-leader': async (ctx) => {
    let kills = 0;
    while (kills < ctx.maxKills && !ctx.isFinished()) {
      const draining = await progress(ctx, () => [...ctx.watch.states().values()].some((s) => DRAINING.has(s)), 30_000);
      if (ctx.isFinished()) break;
      const holder = await leaseHolder(ctx.world.kc, ctx.world.ns.name).catch(() => undefined);
      const victim = ctx.coordinators.find((c) => c.isRunning() && c.identity === holder);
      if (victim === undefined) {
        await between(ctx.random, 200, 1_000);
        continue;
      }
      const life = ctx.lifeOf(victim.identity);
      const states = inFlight(ctx);
      await victim.kill('SIGKILL');
      ctx.addFault(`SIGKILL leader ${victim.identity} (${life}${draining ? '' : ', no node draining within 30 s'}${states})`);
      kills += 1;
      ctx.startCoordinator();
      await afterTransitions(ctx, 1);
    }
  },
  'restart-apiserver': async (ctx) => {
    await afterTransitions(ctx, 2 + Math.floor(ctx.random() * 6));
    const states = inFlight(ctx);
    await ctx.plane.restartApiServer();
    ctx.addFault(`restart kube-apiserver${states}`);
  },
  'restart-etcd': async (ctx) => {
    await afterTransitions(ctx, 2 + Math.floor(ctx.random() * 6));
    const states = inFlight(ctx);
    await ctx.plane.restartEtcd();
    ctx.addFault(`restart etcd${states}`);
  },
  'conflicting-edits': conflictingEdits,
  'node-churn': nodeChurn,
  'node-not-ready': nodeNotReady,
  'agents-killed': agentsKilled,
  'two-releases': outsideUncordons,
  'crash-looping-agent': (ctx) => {
    ctx.addFault('driver v2 is the real agent crash-looping on a bad configuration (restarted with back-off by the process kubelet)');
    ctx.expectEnd(endsOnRestartRule);
    return Promise.resolve();
  },
  'stuck-workloads': (ctx) => {
    ctx.addFault('PDB never allowing eviction, job pod never finishing, validator never Ready (set up before the upgrade)');
    return Promise.resolve();
  },
};

const DRAINING = new Set(['wait-for-jobs-required', 'pod-deletion-required', 'drain-required']);
const UPGRADING = new Set(['cordon-required', ...DRAINING, 'pod-restart-required', 'validation-required']);

/** True once `check` holds (tried on every node change), false after `timeoutMs` or when the rollout has ended. */
async function progress(ctx: FaultContext, check: () => boolean, timeoutMs: number): Promise<boolean> {
  return Promise.race([ctx.watch.until(check, timeoutMs), ctx.ended.then(() => false)]);
}

/** Waits for `count` more state changes of the rollout (60 s at most), or its end. */
async function afterTransitions(ctx: FaultContext, count: number): Promise<void> {
  const target = ctx.watch.transitions() + count;
  await progress(ctx, () => ctx.watch.transitions() >= target, 60_000);
}

/** ", in flight: n1 drain-required, n3 cordon-required" (the nodes in an upgrading state), or "". */
function inFlight(ctx: FaultContext): string {
  const busy = [...ctx.watch.states()].filter(([, s]) => UPGRADING.has(s)).map(([n, s]) => `${shortNodeName(n)} ${s}`);
  return busy.length === 0 ? '' : `, in flight: ${busy.join(', ')}`;
}

async function injectFaults(ctx: FaultContext): Promise<void> {
  await INJECT[ctx.scenario](ctx);
}

/**
 * Another client writes the same nodes all along; a user moves a node to the other pool by hand
 * while it is upgrading (the first node seen in an upgrading state after 1–4 state changes).
 */
async function conflictingEdits(ctx: FaultContext): Promise<void> {
  const { world, random } = ctx;
  let edits = 0;
  const relabelAfter = ctx.watch.transitions() + 1 + Math.floor(random() * 4);
  const admin = world.nodeNames.at(-1);
  let relabelled = false;
  while (!ctx.isFinished()) {
    const name = world.nodeNames[Math.floor(random() * world.nodeNames.length)] ?? '';
    await world.core
      .patchNode({ name, body: { metadata: { labels: { 'example.com/edited': String(edits) }, annotations: { 'example.com/touch': String(Date.now()) } } } }, MERGE_PATCH)
      .then(() => (edits += 1), () => undefined);
    const upgrading = [...ctx.watch.states()].filter(([n, s]) => n !== admin && UPGRADING.has(s)).map(([n]) => n);
    if (!relabelled && ctx.watch.transitions() >= relabelAfter && upgrading.length > 0) {
      const relabel = upgrading[Math.floor(random() * upgrading.length)] ?? '';
      const node = (await world.nodes()).find((n) => n.metadata?.name === relabel);
      const pool = node?.metadata?.labels?.pool === 'a' ? 'b' : 'a';
      await world.core.patchNode({ name: relabel, body: { metadata: { labels: { pool } } } }, MERGE_PATCH).catch(() => undefined);
      ctx.addFault(`user moved ${relabel} to pool ${pool} (state ${node === undefined ? '?' : world.stateOf(node)})`);
      relabelled = true;
    }
    await between(random, 20, 200);
  }
  ctx.addFault(`${edits} conflicting label/annotation edits`);
}

/** A random node in an upgrading state (not the admin-cordoned one), after 0–2 state changes; undefined if none is within 60 s. */
async function anUpgradingNode(ctx: FaultContext): Promise<string | undefined> {
  const admin = ctx.world.nodeNames.at(-1);
  const candidates = (): string[] => [...ctx.watch.states()].filter(([n, s]) => n !== admin && UPGRADING.has(s)).map(([n]) => n);
  await afterTransitions(ctx, Math.floor(ctx.random() * 3));
  await progress(ctx, () => candidates().length > 0, 60_000);
  const upgrading = candidates();
  return upgrading[Math.floor(ctx.random() * upgrading.length)];
}

/** A node deleted while it upgrades (the first seen in an upgrading state), then a node added 1–3 state changes later. */
async function nodeChurn(ctx: FaultContext): Promise<void> {
  const { world, random } = ctx;
  const name = (await anUpgradingNode(ctx)) ?? world.nodeNames[0] ?? '';
  const state = ctx.watch.states().get(name) ?? '?';
  ctx.watch.forgetNode(name);
  await world.core.deleteNode({ name });
  world.nodeNames = world.nodeNames.filter((n) => n !== name);
  ctx.addFault(`deleted node ${name} in ${state}`);
  await afterTransitions(ctx, 1 + Math.floor(random() * 2));
  if (ctx.isFinished()) {
    ctx.addFault('no node added: the rollout ended first');
    return;
  }
  const added = `${world.id}-new`;
  await createFakeNodes(world.kc, [{ name: added, labels: { pool: 'a', [OPERAND_LABEL]: 'true', [TEST_NODE_LABEL]: world.id } }]);
  world.nodeNames.push(added);
  ctx.addFault(`added node ${added}${inFlight(ctx)}`);
}

/**
 * A node turns NotReady while it upgrades: its Ready condition Unknown, as the node controller
 * writes it when a kubelet stops reporting, kept so by the test bed's KUBELET_STOPPED_ANNOTATION.
 * Only the condition: KWOK (v0.8.0) keeps running the node's pods and renewing its lease (its
 * manage-nodes annotation filter drops updates, so un-annotating a node does not stop it; read in
 * its informer source), so this is the node as the API reports it, not a dead host: its pods stay
 * Ready. The victim is a node before its
 * driver restart (cordon-required … drain-required) when there is one, else any upgrading node.
 * In half the runs it turns Ready again 2–6 state changes later (or after 20 s), in the others it
 * stays NotReady to the end. The coordinator must not finish a NotReady node
 * (coordinator/plan/node-not-ready.ts): one NotReady for good ends upgrade-failed with a reason
 * naming NotReady (after NOT_READY_FAIL_AFTER_S); one that comes back before that ends upgrade-done.
 */
async function nodeNotReady(ctx: FaultContext): Promise<void> {
  const { world, random } = ctx;
  const admin = world.nodeNames.at(-1);
  const inStates = (states: ReadonlySet<string>): string[] => [...ctx.watch.states()].filter(([n, s]) => n !== admin && states.has(s)).map(([n]) => n);
  await afterTransitions(ctx, Math.floor(random() * 3));
  await progress(ctx, () => inStates(UPGRADING).length > 0, 60_000);
  const before = inStates(BEFORE_RESTART);
  const pool = before.length > 0 ? before : inStates(UPGRADING);
  const name = pool[Math.floor(random() * pool.length)];
  if (name === undefined) {
    ctx.addFault('no node made NotReady: none was upgrading');
    return;
  }
  const comesBack = random() < 0.5;
  await setNodeReady(world, name, false);
  const notReadyAt = Date.now();
  // Read after the write: a node still before its driver restart now must be held by the coordinator from here on.
  const node = (await world.nodes()).find((n) => n.metadata?.name === name);
  const state = node === undefined ? '?' : world.stateOf(node);
  const judged = BEFORE_RESTART.has(state);
  ctx.addFault(`node ${name} NotReady in ${state}${comesBack ? '' : ' (for good)'}${judged ? '' : ' (already past the driver restart: end not judged)'}`);
  if (!comesBack) {
    if (judged) ctx.expectEnd(endsFailedNamingNotReady(name));
    return;
  }
  await Promise.race([afterTransitions(ctx, 2 + Math.floor(random() * 5)), sleep(20_000)]);
  await setNodeReady(world, name, true);
  const seconds = (Date.now() - notReadyAt) / 1000;
  ctx.addFault(`node ${name} Ready again in ${ctx.watch.states().get(name) ?? '?'} after ${seconds.toFixed(1)} s`);
  // Back within the bound: the hold (if any) ends and the node finishes. (Past it, failing was right too.)
  if (judged && seconds < NOT_READY_FAIL_AFTER_S) ctx.expectEnd(endsDone(name));
}

/** podRestart.failAfterSeconds of the node-not-ready scenario: how long a NotReady node is held before it fails. */
const NOT_READY_FAIL_AFTER_S = 30;

const BEFORE_RESTART: ReadonlySet<string> = new Set(['cordon-required', ...DRAINING]);

function endsFailedNamingNotReady(name: string): OutcomeCheck {
  return (final) => {
    const end = final.find((f) => f.node === name);
    if (end?.state === 'upgrade-failed' && end.reason.includes('NotReady')) return null;
    return `${name}, NotReady for good before its driver restart, ended ${end?.state ?? 'missing'} (${end?.reason ?? ''}), not upgrade-failed naming NotReady`;
  };
}

function endsDone(name: string): OutcomeCheck {
  return (final) => {
    const end = final.find((f) => f.node === name);
    return end?.state === 'upgrade-done' ? null : `${name}, NotReady for less than ${NOT_READY_FAIL_AFTER_S} s, ended ${end?.state ?? 'missing'} (${end?.reason ?? ''}), not upgrade-done`;
  };
}

/**
 * Sets the node's Ready condition: Unknown as the node controller writes it for a silent kubelet,
 * or True as a kubelet reports it. While it is not Ready the node carries the test bed's
 * KUBELET_STOPPED_ANNOTATION, or KWOK's node-initialize stage would set it Ready again at its next
 * change (the coordinator's next label write).
 */
export async function setNodeReady(world: RolloutWorld, name: string, ready: boolean): Promise<void> {
  const now = new Date();
  const condition = ready
    ? { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: now, lastTransitionTime: now }
    : { type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.', lastHeartbeatTime: now, lastTransitionTime: now };
  if (!ready) await world.core.patchNode({ name, body: { metadata: { annotations: { [KUBELET_STOPPED_ANNOTATION]: 'true' } } } }, MERGE_PATCH);
  await world.core.patchNodeStatus({ name, body: { status: { conditions: [condition] } } }, STRATEGIC_MERGE_PATCH);
  if (ready) await world.core.patchNode({ name, body: { metadata: { annotations: { [KUBELET_STOPPED_ANNOTATION]: null } } } }, MERGE_PATCH);
}

/** The process kubelet's back-off for restarted containers (the kubelet's is 10 s … 5 min). */
const AGENT_RESTART = { initialBackoffMs: 500, maxBackoffMs: 3_000 } as const;

/** The steps between the cordon and the validation, when a node must stay cordoned; the first three before the driver restart. */
const CORDONED_STEPS: ReadonlySet<string> = new Set([...DRAINING, 'pod-restart-required', 'validation-required']);

/** Outside uncordons per two-releases run. */
const UNCORDONS = 4;

/**
 * Two releases (two drivers, two coordinators) on the same nodes, and nodes uncordoned from
 * outside mid-upgrade, as an admin's `kubectl uncordon` or a third operator would: each time a
 * node (never the admin-cordoned one) in a step that needs it cordoned for either driver, one
 * before its driver restart when there is one, 1–3 state changes after the last; after the
 * second, one coordinator of a release drawn at random SIGKILLed and started again. The
 * observers judge that neither driver moves such a node on before it is cordoned again
 * (cordonLostViolation), that the admin's cordon stays, and the limits of each.
 */
async function outsideUncordons(ctx: FaultContext): Promise<void> {
  const { world, random } = ctx;
  const second = ctx.second;
  if (second === undefined) throw new Error('two-releases needs the second release');
  const admin = world.nodeNames.at(-1);
  const inSteps = (steps: ReadonlySet<string>): string[] =>
    world.nodeNames.filter((n) => n !== admin && (steps.has(ctx.watch.states().get(n) ?? '') || steps.has(second.watch.states().get(n) ?? '')));
  for (let uncordons = 0; uncordons < UNCORDONS && !ctx.isFinished(); uncordons += 1) {
    await afterTransitions(ctx, 1 + Math.floor(random() * 3));
    // Either observer's change may bring a node into a step: wake on both. A node before its
    // driver restart for 15 s at most (those steps are short), else any step that needs the cordon.
    const inStepNow = async (steps: ReadonlySet<string>, ms: number): Promise<boolean> =>
      Promise.race([progress(ctx, () => inSteps(steps).length > 0, ms), second.watch.until(() => inSteps(steps).length > 0, ms)]);
    if (!(await inStepNow(DRAINING, 15_000))) await inStepNow(CORDONED_STEPS, 60_000);
    const before = inSteps(DRAINING);
    const pool = before.length > 0 ? before : inSteps(CORDONED_STEPS);
    const name = pool[Math.floor(random() * pool.length)];
    if (name === undefined) continue;
    const node = await world.core.patchNode({ name, body: { spec: { unschedulable: false } } }, MERGE_PATCH);
    ctx.addFault(`outside uncordon of ${shortNodeName(name)} (${world.stateOf(node)}, second ${second.world.stateOf(node)})`);
    if (uncordons === 1) await killOneRelease(ctx, second.world);
  }
}

/** SIGKILLs the running coordinator of a release drawn at random, and starts another of it. */
async function killOneRelease(ctx: FaultContext, secondWorld: RolloutWorld): Promise<void> {
  const ofSecond = ctx.random() < 0.5;
  const victim = ctx.coordinators.find((c) => c.isRunning() && c.identity.startsWith(SECOND_RELEASE_IDENTITY) === ofSecond);
  if (victim === undefined) return;
  const life = ctx.lifeOf(victim.identity);
  await victim.kill('SIGKILL');
  ctx.addFault(`SIGKILL ${victim.identity} (${ofSecond ? 'second' : 'first'} release, ${life}${inFlight(ctx)})`);
  ctx.startCoordinator(ofSecond ? secondWorld : undefined);
}

/** The agents' module cache for chaos runs, kept across runs (DRIVER_ROLLOUT_CACHE or ~/.cache/driver-rollout): the sample driver compiles once per version. */
function chaosModuleCache(): string {
  return join(process.env['DRIVER_ROLLOUT_CACHE'] ?? join(homedir(), '.cache', 'driver-rollout'), 'chaos-module-cache');
}

/**
 * The real init container (safe-load gate) or agent SIGKILLed at random points of the upgrade:
 * each kill 1–3 state changes after the last, the victim a waiting init container every other
 * time there is one, else a running container of a pod on an upgrading node when there is one
 * (else any), as an OOM kill or a crash would end it; the
 * process kubelet restarts it after back-off and reports the restart.
 */
async function agentsKilled(ctx: FaultContext): Promise<void> {
  const agents = ctx.agents;
  if (agents === undefined) throw new Error('agents-killed needs the real agents');
  for (let kills = 0; kills < Math.min(ctx.maxKills, 6) && !ctx.isFinished(); ) {
    await afterTransitions(ctx, 1 + Math.floor(ctx.random() * 3));
    if (ctx.isFinished()) break;
    const states = ctx.watch.states();
    const running = agents.running();
    const upgrading = running.filter((c) => UPGRADING.has(states.get(c.node) ?? ''));
    // An init container runs only while its gate waits for the coordinator: when one does, it is the victim every other time.
    const gates = running.filter((c) => c.container === 'safe-load-gate');
    const pool = gates.length > 0 && ctx.random() < 0.5 ? gates : upgrading.length > 0 ? upgrading : running;
    const victim = pool[Math.floor(ctx.random() * pool.length)];
    if (victim === undefined) continue;
    victim.kill();
    kills += 1;
    ctx.addFault(`SIGKILL ${victim.container} of ${victim.pod} on ${shortNodeName(victim.node)} (${states.get(victim.node) ?? '?'})`);
  }
}

/**
 * The crash loop fails its node on upstream's restart rule (handle-pod-restart.ts: a driver pod
 * not Ready after more than 10 restarts), naming the restarts and the kubelet's CrashLoopBackOff;
 * the failure budget (maxFailedNodes 1) halts the nodes that have not started.
 */
function endsOnRestartRule(final: readonly NodeEnd[]): string | null {
  const failed = final.filter((f) => f.state === 'upgrade-failed');
  const ends = final.map((f) => `${shortNodeName(f.node)} ${f.state} (${f.reason})`).join('; ');
  if (failed.length === 0) return `no node failed: ${ends}`;
  const otherRule = failed.filter((f) => !/is not Ready after (1[1-9]|[2-9]\d|\d{3,}) restarts \(.*agent: CrashLoopBackOff/.test(f.reason));
  if (otherRule.length > 0) return `failed on another rule than the restart count: ${ends}`;
  const notHalted = final.filter((f) => f.state !== 'upgrade-failed' && !f.reason.startsWith('halted'));
  return notHalted.length === 0 ? null : `not halted by the failure budget: ${ends}`;
}

/** The label of the driver pods the process kubelet runs (crash-looping-agent). */
const PROCESS_LABEL = 'example.com/chaos-process';

/**
 * Driver v2 is the real agent (`node agent/main.ts`, readiness gate on its condition), which the
 * process kubelet (demo/process-kubelet.ts) runs for every new driver pod and restarts with
 * back-off, reporting restarts and CrashLoopBackOff in the pod's status as a kubelet does. Its
 * configuration asks for the simulated kernel, which the production entry point refuses (exit 2):
 * a misconfigured agent that crashes in a loop, never Ready.
 */
async function crashLoopingDriver(world: RolloutWorld, kubeconfigPath: string): Promise<void> {
  const logDir = await mkdtemp(join(tmpdir(), `${world.id}-pods-`));
  const kubelet = new ProcessKubelet({
    kubeConfig: world.kc,
    kubeconfigPath,
    namespace: world.ns.name,
    labelSelector: `${PROCESS_LABEL}=agent`,
    logDir,
    nodeEnv: () => Promise.resolve({}),
    // The kubelet's back-off (10 s doubling to 5 min) would take half an hour to the 11th restart.
    restart: { initialBackoffMs: 200, maxBackoffMs: 1_000 },
  });
  await kubelet.start();
  world.onTearDown(async () => {
    await kubelet.stop();
    await rm(logDir, { recursive: true, force: true });
  });
  const env = { DRIVER_NAME: world.driver, KEY_DOMAIN: world.keys.domain, DEVICE_KIND: 'gpu', DRIVER_VERSION: '2.0.0', DRIVER_SOURCE_DIR: '/nonexistent', DRIVER_MODULES: 'drsample_net', KERNEL_ADAPTER: 'simulated' };
  const body = world.daemonSetWith({
    terminationGracePeriodSeconds: 0,
    readinessGates: [{ conditionType: world.keys.driverReadyCondition }],
    containers: [{ name: 'agent', image: 'driver:v2', command: ['node', 'agent/main.ts'], env: Object.entries(env).map(([name, value]) => ({ name, value })) }],
  });
  const template = body.spec?.template.metadata;
  if (template !== undefined) template.labels = { ...template.labels, [PROCESS_LABEL]: 'agent' };
  await world.apps.replaceNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body });
}

/**
 * Pods the policy names (workload=true device pods, evicted by pod deletion; an operand DaemonSet's pods, which leave while
 * the driver restarts; for stuck-workloads one behind a PDB that never allows an eviction, a job
 * pod that never ends, validators that never turn Ready) and pods it must never remove (a
 * DaemonSet's pod on every node, a drain-skip pod).
 */
async function createProtectedPods(world: RolloutWorld, stuck: boolean): Promise<void> {
  const [first, second, third] = world.nodeNames;
  for (const [i, name] of world.nodeNames.entries()) await world.createPod(name, `work-${i}`, { resources: { [DEVICE_RESOURCE]: '1' } });
  await world.createPod(first ?? '', 'skip-me', { labels: { workload: 'true', [world.keys.drainSkip]: 'true' } });
  await createNodeDaemonSet(world, MONITOR_DAEMONSET, { podLabels: { workload: 'true' } });
  await createNodeDaemonSet(world, 'operand', { nodeLabels: { [OPERAND_LABEL]: 'true' }, pod: { terminationGracePeriodSeconds: 0 } });
  if (!stuck) return;
  await world.createPod(second ?? '', 'guarded', { labels: { guard: 'all' }, resources: { [DEVICE_RESOURCE]: '1' } });
  await world.kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
    namespace: world.ns.name,
    body: { metadata: { name: 'never' }, spec: { maxUnavailable: 0, selector: { matchLabels: { guard: 'all' } } } },
  });
  await world.createPod(third ?? '', 'training', { labels: { job: 'never-ends' } });
  await createNodeDaemonSet(world, 'validator', { nodeLabels: { pool: 'b' }, pod: { readinessGates: [{ conditionType: 'example.com/validated' }] } });
}
