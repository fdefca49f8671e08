import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { machineLine, type MachineInfo } from './machine.ts';
import { formatSpread, type Spread } from './stats.ts';

export const RESULTS_DIR = join(import.meta.dirname, '..', 'results');

/** A target a figure is checked against by `npm run bench -- --check`. */
export interface Target {
  readonly op: '<' | '<=';
  readonly value: number;
}

/** One measured figure: the median of several runs is compared with the target. */
export interface Figure {
  readonly name: string;
  readonly unit: string;
  readonly spread: Spread;
  readonly target?: Target;
  /** Anything else worth keeping (per-verb counts, waves, ...). */
  readonly details?: Readonly<Record<string, unknown>>;
}

export interface SuiteResult {
  readonly suite: string;
  readonly machine: MachineInfo;
  /** Load averages when the suite finished. */
  readonly loadAtEnd: readonly number[];
  readonly figures: readonly Figure[];
  /** Free text the table prints under the suite (e.g. what limits the rollout). */
  readonly notes: readonly string[];
  /** An ASCII chart, printed as a code block. */
  readonly chart?: string;
}

export function isMet(f: Figure): boolean | undefined {
  if (f.target === undefined) return undefined;
  return f.target.op === '<' ? f.spread.median < f.target.value : f.spread.median <= f.target.value;
}

export function figureLine(f: Figure): string {
  const met = isMet(f);
  const target = f.target === undefined ? '' : `  target ${f.target.op} ${f.target.value} ${f.unit}: ${met === true ? 'met' : 'MISSED'}`;
  return `${f.name.padEnd(70)} ${formatSpread(f.spread, digitsFor(f)).padStart(22)} ${f.unit}${target}`;
}

function digitsFor(f: Figure): number {
  return Math.abs(f.spread.median) >= 100 ? 0 : Math.abs(f.spread.median) >= 10 ? 1 : 2;
}

/** bench/results/<suite>.json (the latest run of that suite) and the Markdown table of every suite's latest run. */
export async function saveSuite(result: SuiteResult): Promise<void> {
  await mkdir(RESULTS_DIR, { recursive: true });
  await writeFile(join(RESULTS_DIR, `${result.suite}.json`), `${JSON.stringify(result, null, 2)}\n`);
  await writeFile(join(RESULTS_DIR, 'README.md'), await markdownOfAll());
}

async function markdownOfAll(): Promise<string> {
  const files = (await readdir(RESULTS_DIR)).filter((f) => f.endsWith('.json')).sort();
  const suites = await Promise.all(files.map(async (f) => JSON.parse(await readFile(join(RESULTS_DIR, f), 'utf8')) as SuiteResult));
  const lines = [
    '# Benchmark results (latest run of each suite)',
    '',
    'Written by `npm run bench` (see bench/README.md). Each figure is the median of its runs, with min–max',
    'in brackets; targets are checked by `npm run bench -- --check`. Figures depend on the machine and how',
    'busy it was (given per suite): compare runs on the same machine, equally quiet.',
    '',
  ];
  for (const s of suites) {
    lines.push(`## ${s.suite}`, '', `Machine: ${machineLine(s.machine)}; load at end ${s.loadAtEnd.join(' / ')}.`, '');
    lines.push('| figure | median (min–max) | unit | runs | target | met |', '|---|---:|---|---:|---|---|');
    for (const f of s.figures) {
      const met = isMet(f);
      lines.push(`| ${f.name} | ${formatSpread(f.spread, digitsFor(f))} | ${f.unit} | ${f.spread.runs} | ${f.target === undefined ? '' : `${f.target.op} ${f.target.value}`} | ${met === undefined ? '' : met ? 'yes' : '**no**'} |`);
    }
    lines.push('');
    for (const n of s.notes) lines.push(`- ${n}`);
    if (s.notes.length > 0) lines.push('');
    if (s.chart !== undefined) lines.push('```', s.chart, '```', '');
  }
  return `${lines.join('\n')}\n`;
}

/** Horizontal bars, one per row, scaled to the largest value. */
export function barChart(rows: readonly { label: string; value: number; mark?: number }[], unit: string, width = 50): string {
  const max = Math.max(...rows.map((r) => Math.max(r.value, r.mark ?? 0)), 1e-9);
  const labelWidth = Math.max(...rows.map((r) => r.label.length));
  return rows
    .map((r) => {
      const bar = '█'.repeat(Math.max(1, Math.round((r.value / max) * width)));
      const mark = r.mark === undefined ? '' : ` (ideal ${r.mark.toFixed(1)})`;
      return `${r.label.padEnd(labelWidth)} │${bar} ${r.value.toFixed(1)} ${unit}${mark}`;
    })
    .join('\n');
}
