import { describe, expect, it } from 'vitest';
import { CoordinatorMetrics, type RolloutNodeCounts } from '../../../../coordinator/metrics/coordinator-metrics.ts';

const counts = (c: Partial<RolloutNodeCounts>): RolloutNodeCounts => ({ inProgress: 0, done: 0, failed: 0, available: 0, pending: 0, ...c });

/** The value of an unlabelled series in the exposition text, or undefined when absent. */
function unlabelled(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

describe('CoordinatorMetrics: the GPU Operator names, for existing dashboards', () => {
  it('exposes NVIDIA gpu-operator gauge names (controllers/operator_metrics.go) without labels, summed over gpu rollouts', async () => {
    const metrics = new CoordinatorMetrics();
    metrics.setRolloutCounts({ namespace: 'a', rollout: 'gpu', driver: 'gpu' }, counts({ inProgress: 1, done: 4, failed: 1, available: 0, pending: 2 }), false);
    metrics.setRolloutCounts({ namespace: 'b', rollout: 'gpu-h100', driver: 'gpu' }, counts({ inProgress: 2, done: 1, available: 1, pending: 3 }), true);
    metrics.setRolloutCounts({ namespace: 'a', rollout: 'ofed', driver: 'ofed' }, counts({ inProgress: 5, done: 9, failed: 7, pending: 8 }), true);
    const text = await metrics.registry.metrics();
    expect(unlabelled(text, 'gpu_operator_nodes_upgrades_in_progress')).toBe(3);
    expect(unlabelled(text, 'gpu_operator_nodes_upgrades_done')).toBe(5);
    expect(unlabelled(text, 'gpu_operator_nodes_upgrades_failed')).toBe(1);
    expect(unlabelled(text, 'gpu_operator_nodes_upgrades_available')).toBe(1);
    expect(unlabelled(text, 'gpu_operator_nodes_upgrades_pending')).toBe(5);
    expect(unlabelled(text, 'gpu_operator_driver_auto_upgrade_enabled')).toBe(1);
    expect(text).toContain('# TYPE gpu_operator_nodes_upgrades_done gauge');
    // Ours stay beside them, one series per DriverRollout.
    expect(text).toContain('driver_rollout_nodes_upgrades_failed{namespace="a",rollout="ofed",driver="ofed"} 7');
  });

  it('drops every rollout series when it loses the Lease: a standby exports no stale values beside the new leader', async () => {
    const metrics = new CoordinatorMetrics();
    metrics.setLeader(true);
    metrics.setRolloutCounts({ namespace: 'a', rollout: 'gpu', driver: 'gpu' }, counts({ done: 3, failed: 1 }), true, true);
    metrics.setRolloutCounts({ namespace: 'a', rollout: 'ofed', driver: 'ofed' }, counts({ pending: 2 }), true);
    expect(await metrics.registry.metrics()).toContain('driver_rollout_halted{namespace="a",rollout="gpu",driver="gpu"} 1');
    metrics.setLeader(false);
    const text = await metrics.registry.metrics();
    expect(text.split('\n').filter((l) => l.startsWith('driver_rollout_') && l.includes('rollout='))).toEqual([]);
    expect(unlabelled(text, 'gpu_operator_nodes_upgrades_failed')).toBe(0);
    expect(unlabelled(text, 'driver_rollout_coordinator_is_leader')).toBe(0);
  });

  it('drops a deleted rollout from the sums; auto-upgrade is 0 when no gpu rollout enables it', async () => {
    const metrics = new CoordinatorMetrics();
    const gpu = { namespace: 'a', rollout: 'gpu', driver: 'gpu' };
    metrics.setRolloutCounts(gpu, counts({ done: 4, failed: 2 }), true);
    metrics.setRolloutCounts({ namespace: 'a', rollout: 'old', driver: 'gpu' }, counts({ done: 1 }), false);
    metrics.forgetRollout(gpu);
    const text = await metrics.registry.metrics();
    expect(unlabelled(text, 'gpu_operator_nodes_upgrades_done')).toBe(1);
    expect(unlabelled(text, 'gpu_operator_nodes_upgrades_failed')).toBe(0);
    expect(unlabelled(text, 'gpu_operator_driver_auto_upgrade_enabled')).toBe(0);
  });

  it('reports a halted rollout (the PrometheusRule DriverRolloutHalted reads driver_rollout_halted)', async () => {
    const metrics = new CoordinatorMetrics();
    metrics.setRolloutCounts({ namespace: 'a', rollout: 'gpu', driver: 'gpu' }, counts({ failed: 2 }), true, true);
    metrics.setRolloutCounts({ namespace: 'a', rollout: 'ofed', driver: 'ofed' }, counts({}), true, false);
    const text = await metrics.registry.metrics();
    expect(text).toContain('driver_rollout_halted{namespace="a",rollout="gpu",driver="gpu"} 1');
    expect(text).toContain('driver_rollout_halted{namespace="a",rollout="ofed",driver="ofed"} 0');
  });

  it('reports the canary’s phase (1 for the current one, 0 for the others) and its node count, and drops both once no canary holds a revision', async () => {
    const metrics = new CoordinatorMetrics();
    const labels = { namespace: 'a', rollout: 'gpu', driver: 'gpu' };
    metrics.setCanary(labels, { phase: 'WaitingForApproval', nodes: ['n1', 'n2'] });
    const text = await metrics.registry.metrics();
    expect(text).toContain('driver_rollout_canary_phase{namespace="a",rollout="gpu",driver="gpu",phase="WaitingForApproval"} 1');
    expect(text).toContain('driver_rollout_canary_phase{namespace="a",rollout="gpu",driver="gpu",phase="CanaryFailed"} 0');
    expect(text).toContain('driver_rollout_canary_nodes{namespace="a",rollout="gpu",driver="gpu"} 2');
    metrics.setCanary(labels, null);
    expect(await metrics.registry.metrics()).not.toMatch(/driver_rollout_canary_(phase|nodes)\{/);
  });

  it('reports the Events waiting to be sent and those dropped, by reason', async () => {
    const metrics = new CoordinatorMetrics();
    metrics.setEventsQueued(42);
    metrics.countEventDropped('full');
    metrics.countEventDropped('full');
    metrics.countEventDropped('closed');
    const text = await metrics.registry.metrics();
    expect(unlabelled(text, 'driver_rollout_events_queued')).toBe(42);
    expect(text).toContain('driver_rollout_events_dropped_total{reason="full"} 2');
    expect(text).toContain('driver_rollout_events_dropped_total{reason="closed"} 1');
  });
});
