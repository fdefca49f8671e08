/** One benchmark: `run` is timed repeatedly; its result is kept so the work cannot be optimised away. */
export interface Benchmark {
  readonly name: string;
  readonly run: () => unknown;
  /** The median must stay under this (ms); checked by `npm run bench`. */
  readonly targetMedianMs?: number;
}

export interface BenchmarkResult {
  readonly name: string;
  readonly runs: number;
  readonly minMs: number;
  readonly medianMs: number;
  readonly p90Ms: number;
  /** Heap still used after the runs and a GC, minus before: a leak shows here. */
  readonly heapDeltaMb: number;
  readonly targetMedianMs: number | undefined;
  readonly met: boolean | undefined;
}

/** Times `b` after warm-up runs; reports min, median, p90 and the heap retained after the runs (with --expose-gc). */
export function measure(b: Benchmark, runs = 15, warmup = 3): BenchmarkResult {
  let sink: unknown;
  for (let i = 0; i < warmup; i++) sink = b.run();
  globalThis.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const timings: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    sink = b.run();
    timings.push(performance.now() - t0);
  }
  globalThis.gc?.();
  const heapDeltaMb = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
  if (sink === Symbol.for('never')) console.log(sink);
  timings.sort((x, y) => x - y);
  const at = (q: number): number => timings[Math.min(timings.length - 1, Math.floor(q * timings.length))] ?? Number.NaN;
  const medianMs = at(0.5);
  return {
    name: b.name,
    runs,
    minMs: at(0),
    medianMs,
    p90Ms: at(0.9),
    heapDeltaMb,
    targetMedianMs: b.targetMedianMs,
    met: b.targetMedianMs === undefined ? undefined : medianMs <= b.targetMedianMs,
  };
}
