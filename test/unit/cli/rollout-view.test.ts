import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildRolloutViews, type ClusterSnapshot, type RolloutObject } from '../../../cli/rollout-view.ts';
import { driverKeys } from '../../../shared/keys.ts';

const NOW = 1_800_000_000_000;
const KEYS = driverKeys('gpu');
const STATE = KEYS.upgradeState;

function aNode(name: string, labels: Record<string, string> = {}, annotations: Record<string, string> = {}, unschedulable = false): V1Node {
  return { metadata: { name, labels, annotations }, spec: { unschedulable } };
}

function aDriverPod(node: string, ready: boolean, dsUid = 'ds-1'): V1Pod {
  return {
    metadata: { name: `gpu-driver-${node}`, namespace: 'dr', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'gpu-driver', uid: dsUid }] },
    spec: { nodeName: node, containers: [] },
    status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

const rollout: RolloutObject = {
  metadata: { name: 'gpu', namespace: 'dr', uid: 'r-1' },
  spec: {
    driverName: 'gpu',
    selector: { matchLabels: { app: 'gpu-driver' } },
    pools: [{ name: 'a', nodeSelector: { matchLabels: { pool: 'a' } } }, { name: 'big', nodeSelector: { matchExpressions: [{ key: 'size', operator: 'In', values: ['xl'] }] } }],
  },
  status: { paused: false, halted: false, nodes: { total: 4, done: 1, failed: 0, inProgress: 1 }, waiting: [{ node: 'n3', state: 'upgrade-required', reason: 'no slot: pool default has 1/1 unavailable' }] },
};

function snapshot(nodes: V1Node[], pods: V1Pod[]): ClusterSnapshot {
  return { rollouts: [rollout], nodes, pods, daemonSetUids: new Map([['r-1', new Set(['ds-1'])]]) };
}

describe('buildRolloutViews', () => {
  it('takes the nodes with its state label or its driver pod, with pool, time in state, reason and driver version', () => {
    const nodes = [
      aNode('n1', { [STATE]: 'upgrade-done', pool: 'a', [KEYS.driverVersion]: '2.0.0' }, { [KEYS.stateStartTime]: String(NOW / 1000 - 90) }),
      aNode('n2', { [STATE]: 'drain-required', pool: 'a', size: 'xl' }, { [KEYS.upgradeReason]: 'drain: PDB ml/trainer' }, true),
      aNode('n3', { [STATE]: 'upgrade-required', [KEYS.nextKernel]: 'failed', [KEYS.nextKernelFailed]: '6.1.0-50-amd64' }),
      aNode('n4', {}),
      aNode('other', { 'nvidia.com/ofed-driver-upgrade-state': 'upgrade-done' }),
    ];
    const [view] = buildRolloutViews(snapshot(nodes, [aDriverPod('n1', true), aDriverPod('n4', false), aDriverPod('other', true, 'ds-other')]), NOW);
    expect(view?.nodes).toEqual([
      { name: 'n2', pool: '(a+big)', state: 'drain-required', secondsInState: null, reason: 'drain: PDB ml/trainer', driverVersion: null, driverReady: false, cordoned: true, skipped: false, nextKernelFailed: null },
      { name: 'n1', pool: 'a', state: 'upgrade-done', secondsInState: 90, reason: '', driverVersion: '2.0.0', driverReady: true, cordoned: false, skipped: false, nextKernelFailed: null },
      { name: 'n3', pool: 'default', state: 'upgrade-required', secondsInState: null, reason: 'no slot: pool default has 1/1 unavailable', driverVersion: null, driverReady: false, cordoned: false, skipped: false, nextKernelFailed: '6.1.0-50-amd64' },
      { name: 'n4', pool: 'default', state: 'unknown', secondsInState: null, reason: '', driverVersion: null, driverReady: false, cordoned: false, skipped: false, nextKernelFailed: null },
    ]);
    expect(view).toMatchObject({ namespace: 'dr', name: 'gpu', driver: 'gpu', keyDomain: 'nvidia.com', total: 4, done: 1, inProgress: 1, paused: false, invalidSpec: null });
  });

  // The status is written at most once a second and may trail the nodes; the reason annotation
  // is the coordinator's per-node record, removed when the node moves on without one.
  it.each([
    { name: 'a done node, its reason annotation left from pod-restart-required', state: 'upgrade-done', annotation: 'restarting the driver pod (timeout 900s)', listed: undefined, shown: '' },
    { name: 'a done node the trailing status still lists as restarting', state: 'upgrade-done', annotation: undefined, listed: { state: 'pod-restart-required', reason: 'restarting the driver pod (timeout 900s)' }, shown: '' },
    { name: 'a node the status lists for an earlier state', state: 'validation-required', annotation: undefined, listed: { state: 'pod-restart-required', reason: 'restarting the driver pod (timeout 900s)' }, shown: '' },
    { name: 'a node the status lists for the state it is in', state: 'drain-required', annotation: undefined, listed: { state: 'drain-required', reason: 'drain: PDB ml/trainer' }, shown: 'drain: PDB ml/trainer' },
    { name: 'a waiting node with its reason annotation', state: 'pod-restart-required', annotation: 'restarting the driver pod (timeout 900s)', listed: undefined, shown: 'restarting the driver pod (timeout 900s)' },
  ])('shows a reason only for the state a node is in: $name → "$shown"', ({ state, annotation, listed, shown }) => {
    const withStatus: RolloutObject = { ...rollout, status: { ...rollout.status, waiting: listed === undefined ? [] : [{ node: 'n1', ...listed }] } };
    const node = aNode('n1', { [STATE]: state }, annotation === undefined ? {} : { [KEYS.upgradeReason]: annotation });
    const [view] = buildRolloutViews({ ...snapshot([node], []), rollouts: [withStatus] }, NOW);
    expect(view?.nodes[0]?.reason).toBe(shown);
  });

  it('shows a state start time that is not unix seconds as the node\'s reason, with no time in state', () => {
    const nodes = [aNode('n1', { [STATE]: 'drain-required' }, { [KEYS.stateStartTime]: 'soon' })];
    const [view] = buildRolloutViews(snapshot(nodes, []), NOW);
    expect(view?.nodes[0]).toMatchObject({ secondsInState: null, reason: `node/n1: annotation ${KEYS.stateStartTime} is not unix seconds: "soon"` });
  });

  it('counts from the nodes when the coordinator wrote no status yet, and shows a refused spec', () => {
    const fresh: RolloutObject = {
      ...rollout,
      spec: { ...rollout.spec, upgradePolicy: { autoUpgrade: false } },
      status: { conditions: [{ type: 'InvalidSpec', status: 'True', message: 'spec.upgradePolicy.maxUnavailable: must be 0..100%' }] },
    };
    const [view] = buildRolloutViews({ ...snapshot([aNode('n1', { [STATE]: 'upgrade-done' })], []), rollouts: [fresh] }, NOW);
    expect(view).toMatchObject({ total: 1, done: 1, failed: 0, paused: true, invalidSpec: 'spec.upgradePolicy.maxUnavailable: must be 0..100%', maintenanceWindow: null });
  });

  it('takes the maintenance window from the status, and shows none for a rollout without windows', () => {
    const closed = { open: false, closesAt: '', nextOpening: '2026-11-28T21:00:00Z', nextWindow: 'Sat 22:00-04:00 Europe/Berlin (2026-11-28T22:00:00)' };
    const [windowed] = buildRolloutViews({ ...snapshot([], []), rollouts: [{ ...rollout, status: { ...rollout.status, maintenanceWindow: closed } }] }, NOW);
    expect(windowed?.maintenanceWindow).toEqual(closed);
    const always = { open: true, closesAt: '', nextOpening: '', nextWindow: '' };
    const [unwindowed] = buildRolloutViews({ ...snapshot([], []), rollouts: [{ ...rollout, status: { ...rollout.status, maintenanceWindow: always } }] }, NOW);
    expect(unwindowed?.maintenanceWindow).toBeNull();
  });

  it('takes the canary from the status (phase, nodes, revision, who approved); none when the status has none or null', () => {
    const canary = { revision: 'gpu-driver=7d9f8c', phase: 'Rolling', nodes: ['n1', 'n2'], approvedBy: 'alice', soakUntil: null, failure: null };
    const withCanary: RolloutObject = { ...rollout, status: { ...rollout.status, canary } };
    const [view] = buildRolloutViews({ ...snapshot([], []), rollouts: [withCanary] }, NOW);
    expect(view?.canary).toEqual(canary);
    const [cleared] = buildRolloutViews({ ...snapshot([], []), rollouts: [{ ...rollout, status: { ...rollout.status, canary: null } }] }, NOW);
    expect(cleared?.canary).toBeNull();
    expect(buildRolloutViews(snapshot([], []), NOW)[0]?.canary).toBeNull();
  });

  it('carries the alert gate\'s verdict from the status; none without one', () => {
    const gated: RolloutObject = { ...rollout, status: { ...rollout.status, alertGate: { state: 'firing', message: 'alert firing: NodeDown (alertGate holds new starts)' } } };
    const [view] = buildRolloutViews({ ...snapshot([aNode('n1', { [STATE]: 'upgrade-required' })], []), rollouts: [gated] }, NOW);
    expect(view?.alertGate).toEqual({ state: 'firing', message: 'alert firing: NodeDown (alertGate holds new starts)' });
    const [plain] = buildRolloutViews({ ...snapshot([aNode('n1', { [STATE]: 'upgrade-required' })], []), rollouts: [rollout] }, NOW);
    expect(plain?.alertGate).toBeNull();
  });
});
