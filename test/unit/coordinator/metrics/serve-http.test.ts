import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { CoordinatorMetrics } from '../../../../coordinator/metrics/coordinator-metrics.ts';
import { serveHttp } from '../../../../coordinator/metrics/serve-http.ts';

const stops: AbortController[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s.abort();
});

async function serve(metrics: CoordinatorMetrics, notReady: () => string | undefined): Promise<string> {
  const stop = new AbortController();
  stops.push(stop);
  const { port } = await serveHttp({ registry: metrics.registry, notReadyReason: notReady, logger: pino({ level: 'silent' }) }, 0, stop.signal);
  return `http://127.0.0.1:${port}`;
}

describe('serveHttp', () => {
  it('exposes the GPU Operator gauges per DriverRollout and the histograms on /metrics', async () => {
    const metrics = new CoordinatorMetrics();
    const labels = { namespace: 'gpu-operator', rollout: 'gpu', driver: 'gpu' };
    metrics.setRolloutCounts(labels, { inProgress: 2, done: 5, failed: 1, available: 0, pending: 3 }, true);
    metrics.observeStateLeft('gpu', 'drain-required', 12);
    metrics.observeUpgradeDone('gpu', 240);
    const base = await serve(metrics, () => undefined);
    const response = await fetch(`${base}/metrics`);
    const text = await response.text();
    expect(response.status).toBe(200);
    const series = 'namespace="gpu-operator",rollout="gpu",driver="gpu"';
    expect(text).toContain(`driver_rollout_nodes_upgrades_in_progress{${series}} 2`);
    expect(text).toContain(`driver_rollout_nodes_upgrades_done{${series}} 5`);
    expect(text).toContain(`driver_rollout_nodes_upgrades_failed{${series}} 1`);
    expect(text).toContain(`driver_rollout_nodes_upgrades_available{${series}} 0`);
    expect(text).toContain(`driver_rollout_nodes_upgrades_pending{${series}} 3`);
    expect(text).toContain(`driver_rollout_driver_auto_upgrade_enabled{${series}} 1`);
    expect(text).toContain('driver_rollout_node_state_duration_seconds_count{driver="gpu",state="drain-required"} 1');
    expect(text).toContain('driver_rollout_node_upgrade_duration_seconds_sum{driver="gpu"} 240');
  });

  it('drops the series of a deleted DriverRollout', async () => {
    const metrics = new CoordinatorMetrics();
    const labels = { namespace: 'n', rollout: 'r', driver: 'ofed' };
    metrics.setRolloutCounts(labels, { inProgress: 1, done: 0, failed: 0, available: 1, pending: 0 }, false);
    metrics.forgetRollout(labels);
    const text = await (await fetch(`${await serve(metrics, () => undefined)}/metrics`)).text();
    expect(text).not.toContain('rollout="r"');
  });

  it.each([
    { reason: undefined, status: 200, body: 'ok' },
    { reason: 'caches not synced: pods', status: 503, body: 'caches not synced: pods' },
  ])('answers /readyz $status when not-ready reason is $reason', async ({ reason, status, body }) => {
    const base = await serve(new CoordinatorMetrics(), () => reason);
    const response = await fetch(`${base}/readyz`);
    expect(response.status).toBe(status);
    expect((await response.text()).trim()).toBe(body);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/nothing`)).status).toBe(404);
  });
});
