/**
 * Scale: one pass over 5,000 nodes and 50,000 pods, mid-rollout. The target is 50 ms on a
 * dedicated core (the benchmark measures it there). This machine is shared and often loaded, so
 * the test asserts on the fastest of several passes (robust to load) with room to spare, and on
 * how the time grows from 1,250 to 5,000 nodes (linear: ×4, plus garbage-collection noise; quadratic would be ×16); it prints
 * the figures.
 */
import { describe, expect, it } from 'vitest';
import type { UpgradeState } from '../../../../shared/keys.ts';
import type { DriverRolloutPolicy } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { applyActions } from '../../../../coordinator/plan/apply-actions.ts';
import { planUpgrades } from '../../../../coordinator/plan/plan-upgrades.ts';
import type { ClusterSnapshot, NodeSnapshot, PodSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import { DRIVER_DAEMONSET, KEYS, NOW, aCluster, aPdb, aPolicy, secondsAgo } from './fixtures.ts';

const PODS_PER_NODE = 10;

function bigCluster(NODES: number): ClusterSnapshot {
  const states: readonly UpgradeState[] = ['upgrade-done', 'upgrade-required', 'upgrade-required', 'upgrade-required', 'drain-required', 'wait-for-jobs-required', 'pod-restart-required', 'validation-required'];
  const nodes: NodeSnapshot[] = [];
  for (let i = 0; i < NODES; i++) {
    const name = `node-${String(i).padStart(5, '0')}`;
    const state = states[i % states.length] ?? 'unknown';
    const started = state !== 'upgrade-done' && state !== 'upgrade-required';
    const pods: PodSnapshot[] = [];
    for (let j = 0; j < PODS_PER_NODE; j++) {
      pods.push({
        namespace: `team-${j % 20}`,
        name: `${name}-pod-${j}`,
        uid: `${name}-${j}`,
        labels: { app: j % 3 === 0 ? 'train' : j === 9 ? 'validator' : 'web', tier: String(j % 4) },
        phase: 'Running',
        ready: true,
        deleting: false,
        controllerKind: j === 9 ? 'DaemonSet' : 'ReplicaSet',
        mirror: false,
        usesEmptyDir: false,
        resourceNames: j % 2 === 0 ? ['cpu', 'memory', 'nvidia.com/gpu'] : ['cpu', 'memory'],
      });
    }
    nodes.push({
      name,
      labels: { [KEYS.upgradeState]: state, rack: `r${i % 8}`, wave: String(i % 5) },
      annotations: started ? { [KEYS.upgradeStartTime]: secondsAgo(600), [KEYS.drainStartTime]: secondsAgo(60), [KEYS.waitForPodCompletionStartTime]: secondsAgo(60), [KEYS.validationStartTime]: secondsAgo(60) } : {},
      unschedulable: started,
      ready: true,
      driverPods: [
        {
          namespace: 'gpu-operator',
          name: `driver-${name}`,
          uid: `driver-${name}`,
          daemonSet: DRIVER_DAEMONSET,
          revisionHash: state === 'upgrade-done' ? 'rev-new' : 'rev-old',
          phase: 'Running',
          ready: true,
          restartCount: 0,
          deleting: false,
        },
      ],
      pods,
    });
  }
  const pdbs = Array.from({ length: 20 }, (_, i) => aPdb(`team-${i}`, `pdb-${i}`, 'app=web', i % 2));
  return { ...aCluster([], pdbs), nodes };
}

function measure(cluster: ClusterSnapshot, policy: DriverRolloutPolicy): { median: number; min: number; actions: number } {
  const timings: number[] = [];
  let actions = 0;
  for (let i = 0; i < 9; i++) {
    const t0 = performance.now();
    const plan = planUpgrades(cluster, policy, NOW);
    timings.push(performance.now() - t0);
    actions = plan.nodePlans.reduce((n, p) => n + p.actions.length, 0);
  }
  timings.sort((a, b) => a - b);
  return { median: timings[Math.floor(timings.length / 2)] ?? Infinity, min: timings[0] ?? Infinity, actions };
}

describe('planning pass at scale', () => {
  it('plans 5,000 nodes and 50,000 pods within budget, growing linearly (figures printed)', () => {
    const policy = aPolicy(
      { maxParallelUpgrades: 0, maxUnavailable: '10%', podDeletion: {}, drain: { enable: true }, waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 600 }, validation: { podSelector: 'app=validator' } },
      { priorityLabel: 'wave', pools: [0, 1, 2, 3].map((r) => ({ name: `rack-${r}`, nodeSelector: { matchLabels: { rack: `r${r}` } }, maxUnavailable: '20%' })) },
    );
    const quarter = measure(bigCluster(1_250), policy);
    const cluster = bigCluster(5_000);
    const first = measure(cluster, policy);
    // Steady state: the first pass's writes are in the cluster (reason annotations, timers, states).
    const steady = measure(applyActions(cluster, planUpgrades(cluster, policy, NOW).nodePlans.flatMap((p) => p.actions)), policy);
    console.log(
      `planUpgrades over 5000 nodes / ${5_000 * PODS_PER_NODE} pods: first pass median ${first.median.toFixed(1)} ms (min ${first.min.toFixed(1)}), ` +
        `steady state median ${steady.median.toFixed(1)} ms (min ${steady.min.toFixed(1)}), ${first.actions} then ${steady.actions} actions; ` +
        `1250 nodes: min ${quarter.min.toFixed(1)} ms`,
    );
    expect(first.actions).toBeGreaterThan(steady.actions);
    expect(steady.actions).toBeGreaterThan(0);
    expect(first.min).toBeLessThan(150);
    expect(steady.min).toBeLessThan(150);
    expect(first.min / quarter.min).toBeLessThan(12);
  });
});
