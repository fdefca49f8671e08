/**
 * Planner pass + snapshot build at 1,000 / 5,000 / 10,000 nodes × 10 pods. Ingest: what the
 * informers do to each object as it arrives (trim, convert to the planner's form; at start-up for
 * the initial list, then one object per watch event), timed apart. First pass: a new leader's
 * first pass over those caches: no pass has assembled anything from them yet, and every node gets
 * actions. Steady: the same objects again, with the first pass's writes applied. Target: first
 * pass + snapshot < 50 ms at 5,000 nodes; growth no worse than linear.
 */
import { setTimeout } from 'node:timers/promises';
import { buildSnapshot } from '../../coordinator/cluster/build-snapshot.ts';
import { ingestNode, ingestPod } from '../../coordinator/cluster/ingest-cached-object.ts';
import { applyActions } from '../../coordinator/plan/apply-actions.ts';
import { planUpgrades } from '../../coordinator/plan/plan-upgrades.ts';
import type { RolloutRef } from '../../coordinator/plan/snapshot.ts';
import type { DriverRolloutPolicy } from '../../coordinator/policy/driver-rollout-spec.ts';
import { NOW, aPolicy } from '../../test/unit/coordinator/plan/fixtures.ts';
import { clusterObjects, DRIVER_NAMESPACE } from '../lib/cluster-objects.ts';
import type { Figure } from '../lib/results.ts';
import { spreadOf } from '../lib/stats.ts';

const ROLLOUT: RolloutRef = { namespace: DRIVER_NAMESPACE, name: 'gpu', generation: 1 };

function policy(): DriverRolloutPolicy {
  return aPolicy(
    { maxParallelUpgrades: 0, maxUnavailable: '10%', podDeletion: {}, drain: { enable: true }, waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 600 }, validation: { podSelector: 'app=validator' } },
    { priorityLabel: 'wave', pools: [0, 1, 2, 3].map((r) => ({ name: `rack-${r}`, nodeSelector: { matchLabels: { rack: `r${r}` } }, maxUnavailable: '20%' })) },
  );
}

const inputsOf = (caches: ReturnType<typeof clusterObjects>['caches']) => ({ caches, writtenNodes: new Map(), evictionBlocked: new Map(), deletedPods: new Map() });

/**
 * Wall and CPU milliseconds of `work`. CPU time of this thread only (the one that runs the pass,
 * its garbage collection included), so less disturbed by a busy machine, and not charged with
 * the collector's background threads still sweeping up after earlier work.
 */
function timed<T>(work: () => T): { result: T; wallMs: number; cpuMs: number } {
  const cpu0 = process.threadCpuUsage();
  const t0 = performance.now();
  const result = work();
  const wallMs = performance.now() - t0;
  const cpu = process.threadCpuUsage(cpu0);
  return { result, wallMs, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** A full collection, then a moment for its background sweeping to finish before anything is timed. */
async function collectGarbage(): Promise<void> {
  globalThis.gc?.();
  await setTimeout(250);
}

export async function plannerFigures(sizes: readonly number[], runs: number): Promise<Figure[]> {
  const p = policy();
  const figures: Figure[] = [];
  const firstMedians: number[] = [];
  for (const nodes of sizes) {
    const m = { firstCpu: [] as number[], firstWall: [] as number[], steadyCpu: [] as number[], steadyWall: [] as number[], snapshotCpu: [] as number[], ingestCpu: [] as number[] };
    for (let run = 0; run < runs + 1; run++) {
      const objects = clusterObjects(nodes, 10);
      await collectGarbage();
      // In place, as the informers do before storing an object (the caches hold these very objects).
      const ingest = timed(() => {
        for (const pod of objects.pods) ingestPod(pod);
        for (const node of objects.nodes) ingestNode(node);
      });
      await collectGarbage();
      const snap = timed(() => buildSnapshot(ROLLOUT, p, inputsOf(objects.caches)));
      const plan = timed(() => planUpgrades(snap.result, p, NOW));
      const warm = buildSnapshot(ROLLOUT, p, inputsOf(objects.caches));
      const applied = applyActions(warm, plan.result.nodePlans.flatMap((n) => n.actions));
      await collectGarbage();
      const steady = timed(() => {
        buildSnapshot(ROLLOUT, p, inputsOf(objects.caches));
        return planUpgrades(applied, p, NOW + 1_000);
      });
      if (run === 0) continue; // warm-up: JIT
      m.snapshotCpu.push(snap.cpuMs);
      m.ingestCpu.push(ingest.cpuMs);
      m.firstCpu.push(snap.cpuMs + plan.cpuMs);
      m.firstWall.push(snap.wallMs + plan.wallMs);
      m.steadyCpu.push(steady.cpuMs);
      m.steadyWall.push(steady.wallMs);
    }
    const firstSpread = spreadOf(m.firstCpu);
    firstMedians.push(firstSpread.median);
    const label = `${nodes.toLocaleString('en')} nodes × 10 pods`;
    figures.push(
      { name: `planner first pass + snapshot, ${label} (CPU time)`, unit: 'ms', spread: firstSpread, ...(nodes === 5_000 ? { target: { op: '<', value: 50 } } : {}), details: { snapshotCpuMs: spreadOf(m.snapshotCpu) } },
      { name: `planner first pass + snapshot, ${label} (wall time)`, unit: 'ms', spread: spreadOf(m.firstWall) },
      { name: `planner steady pass + snapshot, ${label} (CPU time)`, unit: 'ms', spread: spreadOf(m.steadyCpu) },
      { name: `planner steady pass + snapshot, ${label} (wall time)`, unit: 'ms', spread: spreadOf(m.steadyWall) },
      { name: `informer ingest (trim + convert) of all ${(nodes * 11).toLocaleString('en')} objects, ${label} (CPU time)`, unit: 'ms', spread: spreadOf(m.ingestCpu) },
    );
  }
  const smallest = sizes[0];
  const largest = sizes.at(-1);
  if (smallest !== undefined && largest !== undefined && largest > smallest) {
    const growth = (firstMedians.at(-1) ?? Number.NaN) / (firstMedians[0] ?? Number.NaN);
    const linear = largest / smallest;
    figures.push({
      name: `first-pass CPU growth ${smallest.toLocaleString('en')} → ${largest.toLocaleString('en')} nodes, relative to linear (${linear}×)`,
      unit: '× linear',
      spread: spreadOf([growth / linear]),
      target: { op: '<=', value: 1.25 },
    });
  }
  return figures;
}
