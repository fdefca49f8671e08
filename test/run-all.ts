import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `npm test`: the whole suite in two lanes at once, so a 2-core machine keeps both cores busy.
 *
 * - The `nodes` lane runs what needs a node of its own: the kernel project (QEMU guests under TCG,
 *   one emulated CPU each), the images project and the real kubelet node, whose global setup
 *   builds the images first (cached and locked: test/bed/ensure-binaries.ts). Its files run one
 *   after another.
 * - The `main` lane type-checks, lints, then runs the unit, integration and vendor-drivers
 *   projects, which need no image; the integration files also run one after another, mostly
 *   waiting on the control plane they drive.
 *
 * The `nodes` lane's lines are prefixed with its name. Each lane's own summary line is printed as
 * `<lane> lane: N passed, N failed`, and the run ends with one plain `N passed, N failed[, N
 * skipped]` line, their sum; a step that ends without a summary line (a type error, a lint error,
 * a crash) counts as one failure. The exit code is 0 only when both lanes exit 0. A failed type
 * check or lint stops the run, the other lane with it.
 */

interface Step {
  readonly command: string;
  readonly args: readonly string[];
}

interface Lane {
  readonly name: string;
  /** Printed before each of its lines; '' streams them as they are. */
  readonly prefix: string;
  readonly steps: readonly Step[];
}

const BIN = join(import.meta.dirname, '..', 'node_modules', '.bin');
const VITEST = { command: join(BIN, 'vitest'), args: ['run'] };
/** The projects of the `nodes` lane; the `main` lane runs every other one. */
const NODE_PROJECTS = ['kernel', 'images', 'real-node'];

export const LANES: readonly Lane[] = [
  {
    name: 'main',
    prefix: '',
    steps: [
      { command: join(BIN, 'tsc'), args: ['--noEmit', '-p', '.'] },
      { command: join(BIN, 'eslint'), args: ['.'] },
      { command: VITEST.command, args: [...VITEST.args, ...NODE_PROJECTS.map((p) => `--project=!${p}`)] },
    ],
  },
  {
    name: 'nodes',
    prefix: '[nodes] ',
    steps: [{ command: VITEST.command, args: [...VITEST.args, ...NODE_PROJECTS.map((p) => `--project=${p}`)] }],
  },
];

/** A summary line of test/reporters/summary-line-reporter.ts. */
const SUMMARY = /^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$/;

export interface Counts {
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
}

export function parseSummaryLine(line: string): Counts | undefined {
  const match = SUMMARY.exec(line.trim());
  if (match === null) return undefined;
  return { passed: Number(match[1]), failed: Number(match[2]), skipped: Number(match[3] ?? 0) };
}

export function formatSummaryLine(counts: Counts): string {
  return `${String(counts.passed)} passed, ${String(counts.failed)} failed${counts.skipped > 0 ? `, ${String(counts.skipped)} skipped` : ''}`;
}

interface LaneResult {
  readonly ok: boolean;
  /** The counts of the lane's summary lines; a step that failed without one adds one failure. */
  readonly counts: Counts;
}

const running = new Set<ChildProcess>();

function runStep(lane: Lane, step: Step): Promise<{ code: number; counts: Counts | undefined }> {
  return new Promise((resolve) => {
    // Its own process group, so a stop reaches vitest's workers and the services they started.
    const child = spawn(step.command, step.args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    running.add(child);
    let counts: Counts | undefined;
    const forward = (stream: NodeJS.ReadableStream, out: NodeJS.WriteStream): void => {
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        // eslint-disable-next-line no-control-regex
        const plain = line.replace(/\x1b\[[0-9;]*m/g, '');
        const parsed = parseSummaryLine(plain);
        if (parsed !== undefined) {
          counts = parsed;
          // The lane's own total, named, so only the run's last line is a bare summary.
          out.write(`${lane.name} lane: ${formatSummaryLine(parsed)}\n`);
          return;
        }
        out.write(`${lane.prefix}${line}\n`);
      });
    };
    forward(child.stdout, process.stdout);
    forward(child.stderr, process.stderr);
    child.on('close', (code, signal) => {
      running.delete(child);
      resolve({ code: code ?? (signal === null ? 1 : 128), counts });
    });
    child.on('error', (error) => {
      running.delete(child);
      process.stderr.write(`${lane.prefix}${step.command}: ${error.message}\n`);
      resolve({ code: 127, counts });
    });
  });
}

async function runLane(lane: Lane, stopOthers: () => void): Promise<LaneResult> {
  let counts: Counts = { passed: 0, failed: 0, skipped: 0 };
  for (const step of lane.steps) {
    const result = await runStep(lane, step);
    const stepCounts = result.counts ?? { passed: 0, failed: result.code === 0 ? 0 : 1, skipped: 0 };
    counts = { passed: counts.passed + stepCounts.passed, failed: counts.failed + stepCounts.failed, skipped: counts.skipped + stepCounts.skipped };
    if (result.code !== 0) {
      process.stderr.write(`${lane.name} lane: ${[step.command, ...step.args].join(' ')} exited ${String(result.code)}\n`);
      // A step before the tests (type check, lint) failing ends the run: nothing after it would count.
      if (result.counts === undefined) stopOthers();
      return { ok: false, counts };
    }
  }
  return { ok: true, counts };
}

function stopAll(signal: NodeJS.Signals = 'SIGTERM'): void {
  for (const child of running) {
    if (child.pid !== undefined) {
      try {
        process.kill(-child.pid, signal);
      } catch {
        // Already gone.
      }
    }
  }
}

async function main(): Promise<number> {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => { stopAll(signal); });
  const results = await Promise.all(LANES.map((lane) => runLane(lane, () => { stopAll(); })));
  const total = results.reduce<Counts>((sum, r) => ({ passed: sum.passed + r.counts.passed, failed: sum.failed + r.counts.failed, skipped: sum.skipped + r.counts.skipped }), { passed: 0, failed: 0, skipped: 0 });
  process.stdout.write(`\n${formatSummaryLine(total)}\n`);
  return results.every((r) => r.ok) ? 0 : 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = await main();
