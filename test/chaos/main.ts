/**
 * `npm run chaos`: the long chaos run. Every iteration runs one scenario (round robin) on one
 * real `full` control plane with its own seed, the real coordinator processes and the observer.
 *
 *   npm run chaos                                   # 3 iterations of each scenario, seed from the clock
 *   npm run chaos -- --iterations 50 --seed 1234    # replays seeds 1234 … 1283
 *   npm run chaos -- --scenario kill-coordinator --seed 1240 --iterations 1
 *   npm run chaos -- --scenario kill-coordinator --iterations 6 --kills 10   # 60 coordinator SIGKILLs
 *
 * Prints each run's seed first, so a failure replays; exits 1 on any broken promise.
 */
import { parseArgs } from 'node:util';
import { startControlPlane } from '../bed/control-plane.ts';
import { runScenario, SCENARIOS, type Scenario, type ScenarioResult } from './run-scenario.ts';
import { shortNodeName } from './short-node-name.ts';

const { values } = parseArgs({
  options: {
    iterations: { type: 'string', default: String(SCENARIOS.length * 3) },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
    scenario: { type: 'string', multiple: true },
    nodes: { type: 'string', default: '6' },
    kills: { type: 'string', default: '10' },
  },
});

const say = (line: string): void => {
  process.stdout.write(`[chaos] ${line}\n`);
};

async function main(): Promise<number> {
  const iterations = Number(values.iterations);
  const base = Number(values.seed);
  const nodes = Number(values.nodes);
  const maxKills = Number(values.kills);
  const chosen = (values.scenario ?? [...SCENARIOS]) as Scenario[];
  for (const s of chosen) if (!SCENARIOS.includes(s)) throw new Error(`unknown scenario ${s}; one of ${SCENARIOS.join(', ')}`);
  if (!Number.isInteger(iterations) || iterations < 1 || !Number.isInteger(base) || !Number.isInteger(nodes) || nodes < 3 || !Number.isInteger(maxKills) || maxKills < 1) {
    throw new Error('--iterations and --seed must be integers (iterations ≥ 1), --nodes at least 3, --kills (per kill scenario run) at least 1');
  }
  say(`${iterations} iterations, seeds ${base}…${base + iterations - 1}, scenarios ${chosen.join(', ')}`);
  const plane = await startControlPlane({ profile: 'full' });
  const results: ScenarioResult[] = [];
  try {
    for (let i = 0; i < iterations; i += 1) {
      const scenario = chosen[i % chosen.length] as Scenario;
      const seed = base + i;
      say(`run ${i + 1}/${iterations}: ${scenario} --seed ${seed}`);
      const result = await runScenario(plane, scenario, seed, { log: say, nodes, maxKills });
      results.push(result);
      say(`  ${result.seconds.toFixed(0)} s, ${result.faults.length} faults, ${result.checks} changes checked, ${result.violations.length} violations`);
      say(`  faults: ${result.faults.join('; ')}`);
      say(`  end: ${result.final.map((f) => `${shortNodeName(f.node)} ${f.state}${f.ready ? '' : ' NotReady'}${f.state === 'upgrade-done' ? '' : ` (${f.reason})`}`).join('; ')}`);
      for (const v of result.violations) say(`  VIOLATION ${v}  (replay: npm run chaos -- --scenario ${scenario} --seed ${seed} --iterations 1)`);
    }
  } finally {
    await plane.stop();
  }
  const faults = results.reduce((n, r) => n + r.faults.length, 0);
  const byKind = new Map<string, number>();
  for (const f of results.flatMap((r) => r.faults)) byKind.set(kindOf(f), (byKind.get(kindOf(f)) ?? 0) + 1);
  const kills = (byKind.get('coordinator SIGKILL') ?? 0) + (byKind.get('leader SIGKILL') ?? 0);
  const checks = results.reduce((n, r) => n + r.checks, 0);
  const violations = results.reduce((n, r) => n + r.violations.length, 0);
  say(`summary: ${results.length} iterations, ${faults} faults injected (${kills} coordinator SIGKILLs), ${checks} changes checked, ${violations} violations`);
  say(`faults by kind: ${[...byKind].map(([k, n]) => `${k} ${n}`).join(', ')}`);
  return violations === 0 ? 0 : 1;
}

/** A fault's kind, from its description (run-scenario.ts's wording). */
function kindOf(fault: string): string {
  const kinds: [RegExp, string][] = [
    [/^SIGKILL leader /, 'leader SIGKILL'],
    [/^SIGKILL chaos-/, 'coordinator SIGKILL'],
    [/^SIGKILL safe-load-gate /, 'init container SIGKILL'],
    [/^SIGKILL agent /, 'agent SIGKILL'],
    [/^restart kube-apiserver/, 'kube-apiserver restart'],
    [/^restart etcd/, 'etcd restart'],
    [/conflicting label\/annotation edits$/, 'conflicting-edit runs'],
    [/^user moved /, 'hand relabel'],
    [/^deleted node /, 'node deleted'],
    [/^added node /, 'node added'],
    [/ NotReady in /, 'node NotReady'],
    [/ Ready again /, 'node back Ready'],
    [/^PDB never allowing/, 'stuck workloads (PDB, job, validator)'],
    [/crash-looping/, 'crash-looping agent'],
  ];
  return kinds.find(([re]) => re.test(fault))?.[1] ?? 'other';
}

process.exitCode = await main();
