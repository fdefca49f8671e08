/** min / median / max of several runs (the median is the figure compared with a target). */
export interface Spread {
  readonly runs: number;
  readonly min: number;
  readonly median: number;
  readonly max: number;
}

export function spreadOf(values: readonly number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  return { runs: sorted.length, min: sorted[0] ?? Number.NaN, median: quantile(sorted, 0.5), max: sorted.at(-1) ?? Number.NaN };
}

/** Nearest-rank quantile of sorted values (q in 0..1). */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

export function formatSpread(s: Spread, digits = 1): string {
  return s.runs === 1 ? s.median.toFixed(digits) : `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
}
