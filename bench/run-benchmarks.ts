/**
 * `npm run bench`: speed and memory targets, measured here rather than in timed unit tests.
 * Prints one row per benchmark and exits 1 when a target is missed. Figures depend on the
 * machine and its load: compare runs on the same machine, quiet.
 */
import { measure, type BenchmarkResult } from './benchmark.ts';
import { planUpgradesBenchmarks } from './plan-upgrades.bench.ts';

const results: BenchmarkResult[] = [];
for (const b of planUpgradesBenchmarks()) {
  const r = measure(b);
  results.push(r);
  const target = r.targetMedianMs === undefined ? '' : ` target ≤ ${r.targetMedianMs} ms: ${r.met === true ? 'met' : 'MISSED'}`;
  console.log(
    `${r.name.padEnd(58)} median ${r.medianMs.toFixed(1).padStart(6)} ms  min ${r.minMs.toFixed(1).padStart(6)} ms  ` +
      `p90 ${r.p90Ms.toFixed(1).padStart(6)} ms  heap ${r.heapDeltaMb.toFixed(1).padStart(6)} MiB${target}`,
  );
}
const missed = results.filter((r) => r.met === false);
if (missed.length > 0) {
  console.log(`${missed.length} target(s) missed: ${missed.map((r) => r.name).join('; ')}`);
  process.exitCode = 1;
}
