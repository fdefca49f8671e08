import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { CoordinatorMetrics, type RolloutLabels, type RolloutNodeCounts } from '../../../coordinator/metrics/coordinator-metrics.ts';
import { prometheusBinDir } from '../../bed/prometheus-server.ts';
import { renderedRuleGroups, type AlertRule } from './rendered-rule-groups.ts';
import { scrapedSeries, type Act, type Stretch } from './scraped-series.ts';

// The chart's PrometheusRule checked and evaluated by the real promtool (Debian bookworm's
// prometheus package, test/bed/fetch-prometheus.sh), on series scraped from the coordinator's
// real metrics registry (scraped-series.ts): each alert fires when its case happens and stays
// quiet on a healthy rollout.

const run = promisify(execFile);
const GPU: RolloutLabels = { namespace: 'gpu-ops', rollout: 'gpu', driver: 'gpu' };
const PAUSED: RolloutLabels = { namespace: 'gpu-ops', rollout: 'gpu-paused', driver: 'gpu' };
const ALERTS = ['DriverRolloutNodeFailed', 'DriverRolloutHalted', 'DriverRolloutStuck'] as const;
type Alert = (typeof ALERTS)[number];

let promtool = '';
let dir = '';
let rules: AlertRule[] = [];

const counts = (c: Partial<RolloutNodeCounts>): RolloutNodeCounts => ({ inProgress: 0, done: 0, failed: 0, available: 0, pending: 0, ...c });
const replicas = (): Record<string, CoordinatorMetrics> => ({ 'coordinator-a': new CoordinatorMetrics(), 'coordinator-b': new CoordinatorMetrics() });
/** coordinator-a leads; coordinator-b is the standby. */
const leaderA = (counts_: RolloutNodeCounts, opts: { autoUpgrade?: boolean; halted?: boolean } = {}): Act => (r) => {
  r['coordinator-a']?.setLeader(true);
  r['coordinator-b']?.setLeader(false);
  r['coordinator-a']?.setRolloutCounts(GPU, counts_, opts.autoUpgrade ?? true, opts.halted ?? false);
};

interface Expected { readonly at: string; readonly alert: Alert; readonly firing?: { readonly labels?: RolloutLabels; readonly value?: number } }

/** A promtool test case: the scraped series of `stretches` and what each alert is at `expect[].at`. */
async function promtoolCase(name: string, stretches: readonly Stretch[], expected: readonly Expected[]): Promise<object> {
  return {
    name,
    interval: '1m',
    input_series: await scrapedSeries(replicas(), stretches),
    alert_rule_test: expected.map((e) => ({
      eval_time: e.at,
      alertname: e.alert,
      exp_alerts: e.firing === undefined ? [] : [firing(e.alert, e.firing.labels ?? GPU, e.firing.value ?? 1)],
    })),
  };
}

function firing(alert: Alert, labels: RolloutLabels, value: number): object {
  const rule = rules.find((r) => r.alert === alert);
  if (rule === undefined) throw new Error(`the rendered PrometheusRule has no ${alert}`);
  const severity = alert === 'DriverRolloutHalted' ? 'critical' : 'warning';
  const summary = {
    DriverRolloutNodeFailed: `${value} node(s) in upgrade-failed for DriverRollout ${labels.namespace}/${labels.rollout}`,
    DriverRolloutHalted: `DriverRollout ${labels.namespace}/${labels.rollout} halted: maxFailedNodes reached`,
    DriverRolloutStuck: `DriverRollout ${labels.namespace}/${labels.rollout}: nodes waiting and none finished in 1h`,
  }[alert];
  return { exp_labels: { ...labels, severity }, exp_annotations: { summary, description: rule.annotations.description } };
}

beforeAll(async () => {
  const [groups, bin] = await Promise.all([renderedRuleGroups(), prometheusBinDir()]);
  promtool = join(bin, 'promtool');
  rules = groups.flatMap((g) => g.rules);
  dir = await mkdtemp(join(tmpdir(), 'drtest-promtool-'));
  await writeFile(join(dir, 'rules.yaml'), stringify({ groups }));
});

afterAll(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

describe("the chart's PrometheusRule under the real promtool", () => {
  it('passes promtool check rules: three alerts', async () => {
    expect(rules.map((r) => r.alert)).toEqual([...ALERTS]);
    const { stdout } = await run(promtool, ['check', 'rules', join(dir, 'rules.yaml')]);
    expect(stdout).toContain('SUCCESS: 3 rules found');
  });

  it('fires each alert in its case, on the series the coordinator exports, and none on a healthy rollout', async () => {
    const tests = [
      // A node finishes every 30 min (under stuckFor): nothing fires, from the first node on.
      await promtoolCase('healthy rollout', [
        { minutes: 30, act: leaderA(counts({ pending: 3, inProgress: 1 })) },
        { minutes: 30, act: leaderA(counts({ pending: 2, inProgress: 1, done: 1 })) },
        { minutes: 30, act: leaderA(counts({ pending: 1, inProgress: 1, done: 2 })) },
        { minutes: 30, act: leaderA(counts({ inProgress: 1, done: 3 })) },
        { minutes: 30, act: leaderA(counts({ done: 4 })) },
      ], ['29m', '59m', '100m', '149m'].flatMap((at) => ALERTS.map((alert) => ({ at, alert })))),
      // maxFailedNodes 0: failed, not halted. NodeFailed waits 5 min.
      await promtoolCase('a node fails', [
        { minutes: 10, act: leaderA(counts({ pending: 1, inProgress: 1 })) },
        { minutes: 20, act: leaderA(counts({ pending: 1, failed: 1 })) },
      ], [
        { at: '14m', alert: 'DriverRolloutNodeFailed' },
        { at: '16m', alert: 'DriverRolloutNodeFailed', firing: { value: 1 } },
        { at: '29m', alert: 'DriverRolloutHalted' },
      ]),
      // maxFailedNodes 2 reached at minute 5: Halted at once.
      await promtoolCase('the rollout halts', [
        { minutes: 5, act: leaderA(counts({ pending: 3, inProgress: 1, failed: 1 })) },
        { minutes: 10, act: leaderA(counts({ pending: 3, failed: 2 }), { halted: true }) },
      ], [
        { at: '4m', alert: 'DriverRolloutHalted' },
        { at: '6m', alert: 'DriverRolloutHalted', firing: {} },
        { at: '6m', alert: 'DriverRolloutNodeFailed', firing: { value: 2 } },
      ]),
      // Nodes waiting and none done: Stuck only after stuckFor (1h) of it; never while paused.
      await promtoolCase('the rollout is stuck', [
        {
          minutes: 90,
          act: (r) => {
            leaderA(counts({ pending: 2, inProgress: 1, done: 3 }))(r);
            r['coordinator-a']?.setRolloutCounts(PAUSED, counts({ pending: 2, done: 3 }), false);
          },
        },
      ], [
        { at: '50m', alert: 'DriverRolloutStuck' },
        { at: '65m', alert: 'DriverRolloutStuck', firing: {} },
        { at: '89m', alert: 'DriverRolloutStuck', firing: {} },
      ]),
      // The leader that saw the failure loses the Lease; the new one sees the node retried and
      // done. The old replica's series go stale, so the alert resolves.
      await promtoolCase('leader handover after the failed node recovered', [
        { minutes: 10, act: leaderA(counts({ failed: 1 })) },
        {
          minutes: 20,
          act: (r) => {
            r['coordinator-a']?.setLeader(false);
            r['coordinator-b']?.setLeader(true);
            r['coordinator-b']?.setRolloutCounts(GPU, counts({ done: 1 }), true);
          },
        },
      ], [
        { at: '8m', alert: 'DriverRolloutNodeFailed', firing: { value: 1 } },
        { at: '20m', alert: 'DriverRolloutNodeFailed' },
      ]),
    ];
    const file = join(dir, 'tests.yaml');
    await writeFile(file, stringify({ rule_files: ['rules.yaml'], evaluation_interval: '1m', tests }, { lineWidth: 0 }));
    const result = await run(promtool, ['test', 'rules', file]).catch((error: unknown) => error as { stdout: string; stderr: string; code: number });
    expect({ code: 'code' in result ? result.code : 0, out: `${result.stdout}${result.stderr}` }).toEqual({ code: 0, out: expect.stringContaining('SUCCESS') as unknown });
  });
});
