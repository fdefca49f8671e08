/**
 * One planning pass over 5,000 nodes and 50,000 pods, mid-rollout (issue 3's scale target:
 * under 50 ms). Reports the first pass (every node gets actions) and the steady state (the
 * first pass's writes are in the cluster), and how time grows from 1,250 to 5,000 nodes
 * (linear: about 4x; quadratic would be 16x).
 */
import type { UpgradeState } from '../shared/keys.ts';
import type { DriverRolloutPolicy } from '../coordinator/policy/driver-rollout-spec.ts';
import { applyActions } from '../coordinator/plan/apply-actions.ts';
import { planUpgrades } from '../coordinator/plan/plan-upgrades.ts';
import type { ClusterSnapshot, NodeSnapshot, PodSnapshot } from '../coordinator/plan/snapshot.ts';
import { DRIVER_DAEMONSET, KEYS, NOW, aCluster, aPdb, aPolicy, secondsAgo } from '../test/unit/coordinator/plan/fixtures.ts';
import type { Benchmark } from './benchmark.ts';

const PODS_PER_NODE = 10;

export function bigCluster(NODES: number): ClusterSnapshot {
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
          agentCondition: { status: 'True', reason: 'Loaded', message: 'driver loaded' },
          waiting: null,
        },
      ],
      pods,
    });
  }
  const pdbs = Array.from({ length: 20 }, (_, i) => aPdb(`team-${i}`, `pdb-${i}`, 'app=web', i % 2));
  return { ...aCluster([], pdbs), nodes };
}

function policy(): DriverRolloutPolicy {
  return aPolicy(
    { maxParallelUpgrades: 0, maxUnavailable: '10%', podDeletion: {}, drain: { enable: true }, waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 600 }, validation: { podSelector: 'app=validator' } },
    { priorityLabel: 'wave', pools: [0, 1, 2, 3].map((r) => ({ name: `rack-${r}`, nodeSelector: { matchLabels: { rack: `r${r}` } }, maxUnavailable: '20%' })) },
  );
}

function passOver(cluster: ClusterSnapshot, p: DriverRolloutPolicy): () => number {
  return () => planUpgrades(cluster, p, NOW).nodePlans.length;
}

export function planUpgradesBenchmarks(): Benchmark[] {
  const p = policy();
  const cluster = bigCluster(5_000);
  const steady = applyActions(cluster, planUpgrades(cluster, p, NOW).nodePlans.flatMap((plan) => plan.actions));
  return [
    { name: 'planUpgrades 1,250 nodes / 12,500 pods, first pass', run: passOver(bigCluster(1_250), p) },
    { name: 'planUpgrades 5,000 nodes / 50,000 pods, first pass', run: passOver(cluster, p), targetMedianMs: 50 },
    { name: 'planUpgrades 5,000 nodes / 50,000 pods, steady state', run: passOver(steady, p), targetMedianMs: 50 },
  ];
}
