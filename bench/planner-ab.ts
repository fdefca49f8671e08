/**
 * A/B of the planner suite's first and steady pass between two (or more) source trees, in one
 * process: `node --expose-gc bench/planner-ab.ts <tree> <tree> [--nodes N] [--runs N]`, a tree
 * being a checkout's root (e.g. one made by `git worktree add` or `git archive <commit> | tar -x`,
 * with node_modules linked). Each run makes the cluster of bench/suites/planner.ts afresh for
 * every tree and times its passes, the trees taking turns (A B, then B A, ...), so on a busy
 * machine both see the same load; CPU time of this thread, as the suite measures it. Prints
 * min / median / max per tree and the sha256 prefix of each tree's plans (first pass and steady
 * pass: nodePlans, reasons, nextWakeAt, status), which must be equal when a change keeps the
 * output. Not a suite: nothing is stored and no target is checked.
 */
import { createHash } from 'node:crypto';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout } from 'node:timers/promises';
import { spreadOf, formatSpread } from './lib/stats.ts';

/** What a run needs from a tree: the suite's building blocks, as each tree has them. */
interface Tree {
  readonly root: string;
  readonly buildSnapshot: (rollout: unknown, policy: unknown, inputs: unknown) => unknown;
  readonly planUpgrades: (snapshot: unknown, policy: unknown, now: number) => PlanLike;
  readonly applyActions: (snapshot: unknown, actions: readonly unknown[]) => unknown;
  readonly ingestPod: (pod: unknown) => void;
  readonly ingestNode: (node: unknown) => void;
  readonly clusterObjects: (nodes: number, podsPerNode: number) => { caches: unknown; pods: unknown[]; nodes: unknown[] };
  readonly policy: unknown;
  readonly rollout: unknown;
  readonly now: number;
}

interface PlanLike {
  readonly nodePlans: readonly { readonly actions: readonly unknown[] }[];
  readonly reasons: unknown;
  readonly nextWakeAt: unknown;
  readonly status: unknown;
}

interface Figures {
  readonly first: number[];
  readonly steady: number[];
  readonly digests: Set<string>;
}

async function loadTree(root: string): Promise<Tree> {
  const from = async (path: string): Promise<Record<string, unknown>> => (await import(resolve(root, path))) as Record<string, unknown>;
  const snapshot = await from('coordinator/cluster/build-snapshot.ts');
  const ingest = await from('coordinator/cluster/ingest-cached-object.ts');
  const apply = await from('coordinator/plan/apply-actions.ts');
  const plan = await from('coordinator/plan/plan-upgrades.ts');
  const fixtures = await from('test/unit/coordinator/plan/fixtures.ts');
  const objects = await from('bench/lib/cluster-objects.ts');
  const aPolicy = fixtures['aPolicy'] as (spec: object, extra: object) => unknown;
  return {
    root,
    buildSnapshot: snapshot['buildSnapshot'] as Tree['buildSnapshot'],
    planUpgrades: plan['planUpgrades'] as Tree['planUpgrades'],
    applyActions: apply['applyActions'] as Tree['applyActions'],
    ingestPod: ingest['ingestPod'] as Tree['ingestPod'],
    ingestNode: ingest['ingestNode'] as Tree['ingestNode'],
    clusterObjects: objects['clusterObjects'] as Tree['clusterObjects'],
    // As bench/suites/planner.ts.
    policy: aPolicy(
      { maxParallelUpgrades: 0, maxUnavailable: '10%', podDeletion: {}, drain: { enable: true }, waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 600 }, validation: { podSelector: 'app=validator' } },
      { priorityLabel: 'wave', pools: [0, 1, 2, 3].map((r) => ({ name: `rack-${r}`, nodeSelector: { matchLabels: { rack: `r${r}` } }, maxUnavailable: '20%' })) },
    ),
    rollout: { namespace: objects['DRIVER_NAMESPACE'], name: 'gpu', generation: 1 },
    now: fixtures['NOW'] as number,
  };
}

function cpuMs<T>(work: () => T): { result: T; ms: number } {
  const start = process.threadCpuUsage();
  const result = work();
  const used = process.threadCpuUsage(start);
  return { result, ms: (used.user + used.system) / 1000 };
}

async function collectGarbage(): Promise<void> {
  globalThis.gc?.();
  await setTimeout(100);
}

const digestOf = (plans: readonly PlanLike[]): string =>
  createHash('sha256')
    .update(JSON.stringify(plans.map((p) => ({ nodePlans: p.nodePlans, reasons: p.reasons, nextWakeAt: p.nextWakeAt, status: p.status }))))
    .digest('hex')
    .slice(0, 12);

/** One run of the suite's first and steady pass on a fresh cluster. */
async function runOnce(tree: Tree, nodes: number, figures: Figures, record: boolean): Promise<void> {
  const objects = tree.clusterObjects(nodes, 10);
  await collectGarbage();
  for (const pod of objects.pods) tree.ingestPod(pod);
  for (const node of objects.nodes) tree.ingestNode(node);
  await collectGarbage();
  const inputs = (): unknown => ({ caches: objects.caches, writtenNodes: new Map(), evictionBlocked: new Map(), deletedPods: new Map() });
  const snapshot = cpuMs(() => tree.buildSnapshot(tree.rollout, tree.policy, inputs()));
  const first = cpuMs(() => tree.planUpgrades(snapshot.result, tree.policy, tree.now));
  const applied = tree.applyActions(tree.buildSnapshot(tree.rollout, tree.policy, inputs()), first.result.nodePlans.flatMap((n) => n.actions));
  await collectGarbage();
  const steady = cpuMs(() => {
    tree.buildSnapshot(tree.rollout, tree.policy, inputs());
    return tree.planUpgrades(applied, tree.policy, tree.now + 1_000);
  });
  figures.digests.add(digestOf([first.result, steady.result]));
  if (!record) return;
  figures.first.push(snapshot.ms + first.ms);
  figures.steady.push(steady.ms);
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { nodes: { type: 'string', default: '5000' }, runs: { type: 'string', default: '10' } } });
const nodes = Number(values.nodes);
const runs = Number(values.runs);
if (positionals.length === 0 || !Number.isInteger(nodes) || nodes <= 0 || !Number.isInteger(runs) || runs <= 0) {
  console.error('usage: node --expose-gc bench/planner-ab.ts <tree> [<tree>...] [--nodes N] [--runs N]');
  process.exitCode = 2;
} else {
  const trees = await Promise.all(positionals.map(loadTree));
  const figures: Figures[] = trees.map(() => ({ first: [], steady: [], digests: new Set() }));
  const loads: number[] = [];
  // Run 0 warms the JIT up and is not recorded, as in the suite.
  for (let run = 0; run <= runs; run++) {
    const order = trees.map((_, i) => i);
    if (run % 2 === 1) order.reverse();
    for (const i of order) {
      const tree = trees[i];
      const f = figures[i];
      if (tree !== undefined && f !== undefined) await runOnce(tree, nodes, f, run > 0);
    }
    loads.push(loadavg()[0] ?? Number.NaN);
  }
  const loadSpread = spreadOf(loads);
  console.log(`${nodes.toLocaleString('en')} nodes × 10 pods, ${runs} runs per tree, CPU ms min/median/max; load (1 min) ${loadSpread.min.toFixed(1)}-${loadSpread.max.toFixed(1)}`);
  trees.forEach((tree, i) => {
    const f = figures[i];
    if (f === undefined) return;
    console.log(`${tree.root}: first pass + snapshot ${formatSpread(spreadOf(f.first))}, steady ${formatSpread(spreadOf(f.steady))}, plans sha256 ${[...f.digests].join(' ')}`);
  });
}
