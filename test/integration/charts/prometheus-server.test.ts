import { PolicyV1Api } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startPrometheus, type PrometheusAlert as Alert, type PrometheusServer } from '../../bed/prometheus-server.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { installCrd, RolloutWorld } from '../coordinator/harness.ts';
import { renderedRuleGroups } from './rendered-rule-groups.ts';

// A real Prometheus (Debian bookworm's, test/bed/fetch-prometheus.sh) scrapes a running
// coordinator's /metrics, as the chart's ServiceMonitor has it (honorLabels), and evaluates the
// chart's rules: on a healthy rollout no alert; once a node fails and the rollout halts,
// DriverRolloutHalted fires at once and DriverRolloutNodeFailed is pending its 5 minutes.

const HANG_MS = 150_000;
const kc = sharedCluster().kubeConfig();
let world: RolloutWorld;

beforeAll(async () => {
  await installCrd(kc);
});

afterEach(async () => {
  await world.tearDown();
});

/** Prometheus scraping `target` every second with the chart's rules, evaluated every second; stopped when the test ends. */
async function startChartPrometheus(target: string): Promise<PrometheusServer> {
  const prometheus = await startPrometheus({ targets: [target], ruleGroups: await renderedRuleGroups() });
  world.onTearDown(() => prometheus.stop());
  return prometheus;
}

describe("the chart's alerts in a real Prometheus scraping a running coordinator", () => {
  it('none on a healthy rollout; a failed node that halts the rollout fires DriverRolloutHalted at once, DriverRolloutNodeFailed pending', { timeout: 300_000 }, async () => {
    world = new RolloutWorld(kc, 'prom');
    await world.setUp([{}]);
    await world.createDriver('driver:v1');
    const node = world.nodeNames[0] ?? '';
    // A pod whose PDB never allows its eviction: the drain times out and the node fails.
    await world.createPod(node, 'guarded', { labels: { app: 'guarded' } });
    await kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
      namespace: world.ns.name,
      body: { metadata: { name: 'guard' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } } },
    });
    await world.createRollout({ maxFailedNodes: 1, upgradePolicy: { podDeletion: { enable: false }, drain: { enable: true, force: true, timeoutSeconds: 3 } } });
    const { port } = await world.startCoordinator();
    const prometheus = await startChartPrometheus(`127.0.0.1:${String(port)}`);
    const ours = (alerts: Alert[]): Alert[] => alerts.filter((a) => a.labels.namespace === world.ns.name);
    const labels = { namespace: world.ns.name, rollout: 'driver', driver: world.driver };

    await world.waitForStates({ [node]: 'upgrade-done' });
    // Prometheus has the coordinator's series, under the rollout's own namespace label (honorLabels).
    await waitUntil('Prometheus to have scraped the finished first install', async () => {
      const done = await prometheus.query(`driver_rollout_nodes_upgrades_done{namespace="${world.ns.name}"}`);
      return done.some((s) => s.value[1] === '1' && s.metric.rollout === 'driver') ? true : undefined;
    }, { timeoutMs: 60_000, intervalMs: 500 });
    expect(ours(await prometheus.alerts())).toEqual([]);

    await world.bumpDriver('driver:v2');
    await world.waitForStates({ [node]: 'upgrade-failed' }, HANG_MS);
    const alerts = await waitUntil('DriverRolloutHalted to fire', async () => {
      const now = ours(await prometheus.alerts());
      return now.some((a) => a.labels.alertname === 'DriverRolloutHalted' && a.state === 'firing') ? now : undefined;
    }, { timeoutMs: 60_000, intervalMs: 500 });
    const byName = new Map(alerts.map((a) => [a.labels.alertname, a]));
    expect(byName.get('DriverRolloutHalted')?.labels).toEqual({ alertname: 'DriverRolloutHalted', severity: 'critical', ...labels });
    expect(byName.get('DriverRolloutNodeFailed')).toMatchObject({ state: 'pending', labels: { ...labels, severity: 'warning' } });
    expect(Number(byName.get('DriverRolloutNodeFailed')?.value)).toBe(1);
    // Nothing waits (the one node failed): not stuck.
    expect(byName.has('DriverRolloutStuck')).toBe(false);
  });
});
