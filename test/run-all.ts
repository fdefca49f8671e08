import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `npm test`: the whole suite in two lanes at once, so a 2-core machine keeps both cores busy.
 *
 * - The `nodes` lane runs what needs a node of its own: the images and the real kubelet node
 *   (whose global setup builds the images first: cached and locked, test/bed/ensure-binaries.ts),
 *   then the kernel project (QEMU guests under TCG, one emulated CPU each), then the integration
 *   files in NODES_LANE_FILES. Its steps and files run one after another.
 * - The `main` lane type-checks, lints, then runs the unit, integration (but NODES_LANE_FILES) and
 *   vendor-drivers projects, which need no image; the integration files also run one after another,
 *   mostly waiting on the control plane they drive.
 *
 * The `nodes` lane's lines are prefixed with its name. Each test step's summary line is printed as
 * `<lane> lane, <step>: N passed, N failed`, each lane's total as `<lane> lane: N passed, N
 * failed`, and the run ends with one plain `N passed, N failed[, N skipped]` line, the sum of
 * both; a step that ends without a summary line (a crash) counts as one failure. The exit code is
 * 0 only when both lanes exit 0. A failed type check or lint (a gate) stops the run, the other
 * lane with it; a failed test step does not stop the steps after it.
 */

interface Step {
  /** How the step's summary line is labelled. */
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  /** A check before the tests: its failure stops the whole run. */
  readonly gate?: boolean;
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
/**
 * Integration files the `nodes` lane runs (with a control plane of its own) after its projects,
 * so the two lanes take about as long: real agents driven through whole rollouts.
 */
export const NODES_LANE_FILES = ['test/integration/coordinator/load-order-agents.test.ts'];

export const LANES: readonly Lane[] = [
  {
    name: 'main',
    prefix: '',
    steps: [
      { name: 'type check', command: join(BIN, 'tsc'), args: ['--noEmit', '-p', '.'], gate: true },
      { name: 'lint', command: join(BIN, 'eslint'), args: ['.'], gate: true },
      {
        name: 'unit, integration, vendor-drivers',
        command: VITEST.command,
        args: [...VITEST.args, ...NODE_PROJECTS.map((p) => `--project=!${p}`), ...NODES_LANE_FILES.map((f) => `--exclude=${f}`)],
      },
    ],
  },
  {
    name: 'nodes',
    prefix: '[nodes] ',
    steps: [
      { name: 'images, real-node', command: VITEST.command, args: [...VITEST.args, '--project=images', '--project=real-node'] },
      { name: 'kernel', command: VITEST.command, args: [...VITEST.args, '--project=kernel'] },
      { name: 'integration (real agents)', command: VITEST.command, args: [...VITEST.args, '--project=integration', ...NODES_LANE_FILES] },
    ],
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
/** Set by a stop (a failed gate, a signal): no lane starts another step. */
let stopping = false;

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
          // Named, so only the run's last line is a bare summary.
          out.write(`${lane.name} lane, ${step.name}: ${formatSummaryLine(parsed)}\n`);
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
  let ok = true;
  for (const step of lane.steps) {
    if (stopping) break;
    const result = await runStep(lane, step);
    const stepCounts = result.counts ?? { passed: 0, failed: result.code === 0 ? 0 : 1, skipped: 0 };
    counts = { passed: counts.passed + stepCounts.passed, failed: counts.failed + stepCounts.failed, skipped: counts.skipped + stepCounts.skipped };
    if (result.code !== 0) {
      ok = false;
      process.stderr.write(`${lane.name} lane: ${[step.command, ...step.args].join(' ')} exited ${String(result.code)}\n`);
      // A gate (type check, lint) failing ends the run: nothing after it would count.
      if (step.gate === true) {
        stopOthers();
        break;
      }
    }
  }
  process.stdout.write(`${lane.name} lane: ${formatSummaryLine(counts)}\n`);
  return { ok, counts };
}

function stopAll(signal: NodeJS.Signals = 'SIGTERM'): void {
  stopping = true;
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
