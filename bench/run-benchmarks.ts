/**
 * `npm run bench [-- flags]`: speed and memory figures, measured here rather than in timed unit
 * tests (see bench/README.md for every flag). Prints the machine and its load, and for each
 * figure min / median / max over the runs; writes bench/results/<suite>.json and the Markdown
 * table bench/results/README.md. `--check` exits 1 when a figure misses its target; `--stored`
 * checks the stored results without running anything.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadavg } from 'node:os';
import { describeMachine, machineLine, round } from './lib/machine.ts';
import { barChart, figureLine, isMet, RESULTS_DIR, saveSuite, type Figure, type SuiteResult } from './lib/results.ts';
import { spreadOf } from './lib/stats.ts';
import { agentFigures } from './suites/agent.ts';
import { gateFigures } from './suites/gate.ts';
import { memoryFigures } from './suites/memory.ts';
import { plannerFigures } from './suites/planner.ts';
import { measureRollout, type LabelChurnMeasurement, type RolloutCase, type RolloutMeasurement } from './suites/rollout.ts';

const SUITES = ['planner', 'rollout', 'memory', 'gate', 'agent'] as const;
type Suite = (typeof SUITES)[number];

const { values } = parseArgs({
  options: {
    only: { type: 'string', default: 'planner' },
    check: { type: 'boolean', default: false },
    stored: { type: 'boolean', default: false },
    runs: { type: 'string', default: '5' },
    'planner-nodes': { type: 'string', default: '1000,5000,10000' },
    nodes: { type: 'string', default: '100,200,300,1000' },
    unavailable: { type: 'string', default: '10,100' },
    reload: { type: 'string', default: '0,30' },
    'label-churn': { type: 'string', default: '0' },
    'rollout-runs': { type: 'string', default: '1' },
    'memory-nodes': { type: 'string', default: '5000' },
    'gate-runs': { type: 'string', default: '100' },
  },
});

/** A rollout case gave up (named in its suite's notes): the run exits 1 even without --check. */
let casesFailed = false;

const numbers = (text: string, allowZero = false): number[] =>
  text.split(',').map((s) => Number(s.replace('%', '').trim())).filter((n) => Number.isFinite(n) && (n > 0 || (allowZero && n === 0)));

async function main(): Promise<number> {
  if (values.stored) return report(await storedResults());
  const selected = values.only === 'all' ? [...SUITES] : values.only.split(',').map((s) => s.trim());
  const unknown = selected.filter((s) => !(SUITES as readonly string[]).includes(s));
  if (unknown.length > 0) {
    console.error(`unknown suite(s) ${unknown.join(', ')}; choose from ${SUITES.join(', ')} or all`);
    return 2;
  }
  const results: SuiteResult[] = [];
  for (const suite of selected as Suite[]) {
    const machine = describeMachine();
    console.log(`\n== ${suite} on ${machineLine(machine)}`);
    const { figures, notes, chart } = await runSuite(suite);
    const result: SuiteResult = { suite, machine, loadAtEnd: loadavg().map((l) => round(l, 2)), figures, notes, ...(chart === undefined ? {} : { chart }) };
    for (const f of figures) console.log(figureLine(f));
    for (const n of notes) console.log(`  ${n}`);
    if (chart !== undefined) console.log(chart);
    await saveSuite(result);
    results.push(result);
  }
  const code = report(results);
  return casesFailed ? 1 : code;
}

function report(results: readonly SuiteResult[]): number {
  const missed = results.flatMap((r) => r.figures.filter((f) => isMet(f) === false).map((f) => `${r.suite}: ${f.name}`));
  const checked = results.flatMap((r) => r.figures.filter((f) => f.target !== undefined)).length;
  console.log(`\n${checked} figure(s) with a target, ${missed.length} missed${missed.length > 0 ? `: ${missed.join('; ')}` : ''}`);
  return values.check && missed.length > 0 ? 1 : 0;
}

async function storedResults(): Promise<SuiteResult[]> {
  const files = (await readdir(RESULTS_DIR)).filter((f) => f.endsWith('.json'));
  const results = await Promise.all(files.map(async (f) => JSON.parse(await readFile(join(RESULTS_DIR, f), 'utf8')) as SuiteResult));
  for (const r of results) {
    console.log(`\n== ${r.suite} (stored, ${machineLine(r.machine)})`);
    for (const f of r.figures) console.log(figureLine(f));
  }
  return results;
}

async function runSuite(suite: Suite): Promise<{ figures: Figure[]; notes: string[]; chart?: string }> {
  switch (suite) {
    case 'planner':
      return { figures: await plannerFigures(numbers(values['planner-nodes']), Number(values.runs)), notes: [] };
    case 'rollout':
      return rolloutSuite();
    case 'agent':
      return { figures: await agentFigures(Number(values.runs)), notes: [] };
    case 'gate':
      return { figures: await gateFigures(Number(values['gate-runs']), progress), notes: ['The target (p99 < 200 ms) is for an idle machine: compare the load given above.'] };
    case 'memory':
      return { figures: await memoryFigures(numbers(values['memory-nodes'])[0] ?? 5_000, progress), notes: [] };
  }
}

function progress(line: string): void {
  console.log(`  [${new Date().toISOString().slice(11, 19)}] ${line}`);
}

async function rolloutSuite(): Promise<{ figures: Figure[]; notes: string[]; chart: string }> {
  const cases: RolloutCase[] = [];
  for (const labelChurnSeconds of numbers(values['label-churn'], true)) {
    for (const reloadSeconds of numbers(values.reload, true)) {
      for (const nodes of numbers(values.nodes)) {
        for (const unavailablePercent of numbers(values.unavailable)) cases.push({ nodes, unavailablePercent, reloadSeconds, labelChurnSeconds });
      }
    }
  }
  const figures: Figure[] = [];
  const notes: string[] = [];
  const bars: { label: string; value: number; mark?: number }[] = [];
  const failed: string[] = [];
  for (const c of dedupe(cases)) {
    const runs: RolloutMeasurement[] = [];
    const label = caseLabel(c);
    const loadAtStart = loadavg()[0] ?? Number.NaN;
    for (let i = 0; i < Number(values['rollout-runs']); i++) {
      try {
        runs.push(await measureRollout(c, progress));
      } catch (error) {
        // One stuck case must not cost the others: it is reported, and the suite exits 1.
        const message = error instanceof Error ? error.message : String(error);
        progress(`${label}: FAILED: ${message}`);
        failed.push(`${label}: ${message}`);
      }
    }
    const last = runs.at(-1);
    if (last === undefined) continue;
    const of = (pick: (m: RolloutMeasurement) => number) => spreadOf(runs.map(pick));
    figures.push(
      { name: `rollout ${label}: wall time`, unit: 's', spread: of((m) => m.wallSeconds), details: { ...last } },
      { name: `rollout ${label}: ideal (${last.waves} waves × ${last.singleReplaceSeconds} s pod replace)`, unit: 's', spread: of((m) => m.idealSeconds) },
      { name: `rollout ${label}: wall / ideal`, unit: '×', spread: of((m) => m.ratio), ...(c.nodes === 1000 && c.unavailablePercent === 10 && c.reloadSeconds === 30 ? { target: { op: '<=' as const, value: 1.1 } } : {}) },
      { name: `rollout ${label}: controller overhead per wave`, unit: 's', spread: of((m) => m.overheadPerWaveSeconds), ...(c.nodes === 200 && c.unavailablePercent === 10 && c.reloadSeconds === 0 && c.labelChurnSeconds === 0 ? { target: { op: '<=' as const, value: 1 } } : {}) },
      ...floorFigures(label, runs),
      { name: `rollout ${label}: API writes per upgraded node (Events included)`, unit: 'writes', spread: of((m) => m.writesPerNode), target: { op: '<=', value: 12 } },
      { name: `rollout ${label}: cordon writes refused by their guard per upgraded node (422, each re-read and retried)`, unit: 'conflicts', spread: of((m) => m.conflictsPerNode) },
      { name: `rollout ${label}: node re-reads after a conflict per upgraded node (each followed by the write tried again)`, unit: 'retries', spread: of((m) => m.retriesPerNode) },
      { name: `rollout ${label}: node write lists failed and planned again per upgraded node`, unit: 'lists', spread: of((m) => m.replannedPerNode) },
      ...churnFigures(label, runs),
      { name: `rollout ${label}: coordinator CPU time, change to last node done`, unit: 's', spread: of((m) => m.coordinatorCpuSeconds) },
      { name: `rollout ${label}: coordinator RSS at the end`, unit: 'MB', spread: of((m) => m.coordinatorRssMb) },
      { name: `rollout ${label}: most nodes NotReady at once (the test bed's heartbeats)`, unit: 'nodes', spread: of((m) => m.mostNotReady) },
      { name: `rollout ${label}: new connections to the API server`, unit: 'connections', spread: of((m) => m.newConnections), target: { op: '<=', value: 10 } },
      { name: `rollout ${label}: most nodes out of service at once (limit ${last.allowedOutOfService})`, unit: 'nodes', spread: of((m) => m.maxOutOfService), target: { op: '<=', value: last.allowedOutOfService } },
    );
    notes.push(rolloutNote(label, loadAtStart, last));
    bars.push({ label, value: last.wallSeconds, mark: last.idealSeconds });
  }
  for (const f of failed) notes.push(`FAILED ${f}`);
  if (failed.length > 0) casesFailed = true;
  return withStoredCases({ figures, notes, chart: barChart(bars, 's') }, dedupe(cases).map(caseLabel));
}

/**
 * A case's floors, each left out where a run has none (every sample failed, or a case that does
 * not measure it: the pipelined floors need a 0 s reload and more than one wave; stored cases
 * from before a floor was measured have none either).
 */
function floorFigures(label: string, runs: readonly RolloutMeasurement[]): Figure[] {
  const last = runs.at(-1);
  if (last === undefined) return [];
  const of = (pick: (m: RolloutMeasurement) => number) => spreadOf(runs.map(pick));
  return [
    ...(runs.every((m) => Number.isFinite(m.waveFloorSeconds))
      ? [
          { name: `rollout ${label}: one wave's ${last.allowedOutOfService} driver pods replaced at once, no coordinator (the cluster's floor)`, unit: 's', spread: of((m) => m.waveFloorSeconds) },
          { name: `rollout ${label}: wave time above the cluster's floor (wall / waves − floor)`, unit: 's', spread: of((m) => m.aboveFloorPerWaveSeconds) },
        ]
      : []),
    ...(runs.every((m) => Number.isFinite(m.pipelineFloorPerWaveSeconds))
      ? [
          { name: `rollout ${label}: every driver pod replaced ${last.allowedOutOfService} at a time, no coordinator (the cluster's pipelined floor), per wave`, unit: 's', spread: of((m) => m.pipelineFloorPerWaveSeconds) },
          { name: `rollout ${label}: wave time above the pipelined floor (wall / waves − pipelined floor)`, unit: 's', spread: of((m) => m.abovePipelineFloorPerWaveSeconds) },
        ]
      : []),
    ...(runs.every((m) => Number.isFinite(m.cordonPipelineFloorPerWaveSeconds))
      ? [
          { name: `rollout ${label}: the same, each node cordoned before and uncordoned after (the least for a cordoning controller), per wave`, unit: 's', spread: of((m) => m.cordonPipelineFloorPerWaveSeconds) },
          { name: `rollout ${label}: wave time above the cordoning pipelined floor`, unit: 's', spread: of((m) => m.aboveCordonPipelineFloorPerWaveSeconds) },
        ]
      : []),
  ];
}

/** With label churn: whether another writer's labels all survived (target: none lost), and the churn's rate. */
function churnFigures(label: string, runs: readonly RolloutMeasurement[]): Figure[] {
  const churns = runs.map((m) => m.labelChurn).filter((l) => l !== undefined);
  if (churns.length === 0 || churns.length !== runs.length) return [];
  const of = (pick: (l: LabelChurnMeasurement) => number) => spreadOf(churns.map(pick));
  return [
    { name: `rollout ${label}: label churn stored (NFD- and GFD-style writers, no resourceVersion)`, unit: 'writes/s', spread: of((l) => l.storedPerSecond) },
    { name: `rollout ${label}: the churn's labels a node no longer carries (our writes must drop none)`, unit: 'labels', spread: of((l) => l.lostLabels), target: { op: '<=', value: 0 } },
  ];
}

/**
 * A case's note: the machine and when (a stored case stays in the table beside newer ones, see
 * withStoredCases, and the suite's machine line is the latest run's), the load, where the time
 * went, the requests, and the raw samples.
 */
function rolloutNote(label: string, loadAtStart: number, last: RolloutMeasurement): string {
  const machine = describeMachine();
  const t = last.timeline;
  const handoff = Number.isFinite(t.handoffSeconds) ? `slot handoff (node done → next node out) ${t.handoffSeconds} s` : 'no slot handoff (every node in one wave)';
  const floor = last.waveFloorSamples.length === 0 ? 'not sampled' : `samples ${last.waveFloorSamples.join(', ')} s`;
  return (
    `${label}: ran on ${machine.cpu} (${machine.cores} cores) at ${machine.at}; load ${loadAtStart.toFixed(1)} at the start, ${(loadavg()[0] ?? Number.NaN).toFixed(1)} at the end (1 min); ` +
    `where the time goes (medians over nodes): first node out of service ${t.firstStartSeconds} s after the change; out of service → driver pod deleted ${t.startToDeleteSeconds} s; ` +
    `deleted → node done ${t.deleteToDoneSeconds} s (one pod replaced alone: ${last.singleReplaceSeconds} s), of which deleted → replacement Ready ${t.deleteToReadySeconds} s (the cluster) and Ready → node done ${t.readyToDoneSeconds} s (the coordinator); ${handoff}; ` +
    `API server time per coordinator write ${t.writeLatencyMs.median} ms (p90 ${t.writeLatencyMs.p90} ms); ${t.passes} reconcile passes, mean ${t.meanPassMs} ms; ` +
    `coordinator requests per node ${JSON.stringify(last.requestsPerNodeByResource)}; ` +
    `by verb ${JSON.stringify(last.requestsPerNode)}; cordon write conflicts per node ${last.conflictsPerNode}, node re-reads (retries) per node ${last.retriesPerNode}, write lists planned again per node ${last.replannedPerNode}; ${churnNote(last.labelChurn)}` +
    `coordinator CPU ${last.coordinatorCpuSeconds} s over the ${last.wallSeconds} s rollout; most nodes NotReady at once ${last.mostNotReady} (KWOK Lease ${last.heartbeat.leaseDurationSeconds} s, renewed every quarter; node-monitor-grace-period ${last.heartbeat.monitorGracePeriodSeconds} s); Events per node ${last.eventsPerNode}, the last sent ${last.eventsSentAfterSeconds} s after the last node was done; ` +
    `every client's requests during the rollout (apiserver_request_total) ${JSON.stringify(last.clusterRequests)}; ` +
    `connections at once (peak) ${last.peakConnections}; coordinator RSS ${last.coordinatorRssMb} MB; pod replace samples ${last.singleReplaceSamples.join(', ')} s; wave replaced at once (no coordinator) ${floor}; ` +
    `wave ends ${last.doneTimesSeconds.join(', ')} s`
  );
}

/**
 * The cases of this run, plus those of the stored rollout.json that this run did not measure
 * (cases are run one at a time on a small machine): figures and notes are matched by the case's
 * label. The chart shows this run's cases.
 */
async function withStoredCases(result: { figures: Figure[]; notes: string[]; chart: string }, measured: readonly string[]): Promise<{ figures: Figure[]; notes: string[]; chart: string }> {
  const stored = await readFile(join(RESULTS_DIR, 'rollout.json'), 'utf8').then((text) => JSON.parse(text) as SuiteResult, () => undefined);
  if (stored === undefined) return result;
  const isOther = (text: string, prefix: string): boolean => !measured.some((label) => text.startsWith(`${prefix}${label}:`)) && !text.startsWith('FAILED ');
  return {
    figures: [...stored.figures.filter((f) => isOther(f.name, 'rollout ')), ...result.figures],
    notes: [...stored.notes.filter((n) => isOther(n, '')), ...result.notes],
    chart: result.chart,
  };
}

function churnNote(churn: LabelChurnMeasurement | undefined): string {
  if (churn === undefined) return '';
  return (
    `label churn: each node rewritten by each writer every ${churn.intervalSeconds} s, ${churn.stored} writes stored over ${churn.seconds} s (${churn.storedPerSecond}/s), ` +
    `${churn.failed} failed, ${churn.skipped} skipped (previous write under way), ${churn.lostLabels} labels lost${churn.lostExamples.length === 0 ? '' : ` (${churn.lostExamples.join(', ')})`}` +
    `${churn.firstErrors.length === 0 ? '' : `, first errors: ${churn.firstErrors.join('; ')}`}; `
  );
}

function caseLabel(c: RolloutCase): string {
  return `${c.nodes} nodes, ${c.unavailablePercent}%, reload ${c.reloadSeconds} s${c.labelChurnSeconds > 0 ? `, label churn every ${c.labelChurnSeconds} s` : ''}`;
}

function dedupe(cases: readonly RolloutCase[]): RolloutCase[] {
  const seen = new Set<string>();
  return cases.filter((c) => {
    const key = `${c.nodes}/${c.unavailablePercent}/${c.reloadSeconds}/${c.labelChurnSeconds}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

process.exitCode = await main();
