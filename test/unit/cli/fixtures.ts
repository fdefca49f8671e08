import type { NodeView, RolloutView } from '../../../cli/rollout-view.ts';

/** A node view with sensible defaults: `aNodeView('gpu-a-1', { state: 'drain-required' })`. */
export function aNodeView(name: string, over: Partial<NodeView> = {}): NodeView {
  return { name, pool: 'default', state: 'upgrade-done', secondsInState: 65, reason: '', driverVersion: '2.0.0', driverReady: true, cordoned: false, skipped: false, nextKernelFailed: null, ...over };
}

export function aRolloutView(nodes: readonly NodeView[], over: Partial<RolloutView> = {}): RolloutView {
  return {
    namespace: 'driver-rollout',
    name: 'gpu',
    driver: 'gpu',
    keyDomain: 'nvidia.com',
    total: nodes.length,
    done: nodes.filter((n) => n.state === 'upgrade-done').length,
    failed: nodes.filter((n) => n.state === 'upgrade-failed').length,
    inProgress: 0,
    paused: false,
    halted: false,
    invalidSpec: null,
    maintenanceWindow: null,
    canary: null,
    alertGate: null,
    nodes,
    ...over,
  };
}

export const MIDWAY = aRolloutView([
  aNodeView('gpu-a-1', { pool: 'a' }),
  aNodeView('gpu-a-2', { pool: 'a', state: 'drain-required', cordoned: true, secondsInState: 42, driverVersion: '1.0.0', reason: 'drain: pod ml/trainer-7d9f refused eviction: PodDisruptionBudget ml/trainer allows 0 disruptions' }),
  aNodeView('gpu-b-1', { pool: 'b', state: 'upgrade-required', secondsInState: 3700, driverVersion: '1.0.0', reason: 'no slot: pool b has 2/2 nodes unavailable (maxUnavailable 2)' }),
  aNodeView('gpu-b-2', { pool: 'b', state: 'pod-restart-required', cordoned: true, secondsInState: 5, driverVersion: '1.0.0', driverReady: false }),
], { inProgress: 2 });
