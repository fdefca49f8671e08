/**
 * A start planned by one pass and not sent yet (it waits for the slot it was handed, or for room
 * among the writes under way) is revoked by a newer pass that would hold it: the pool went
 * NotReady, the node did, the rollout was paused (coordinator/plan/pending-starts.ts). Slots,
 * pacing and the canary count the start itself, so they never revoke it; a start already stored
 * runs on.
 */
import { describe, expect, it } from 'vitest';
import { applyActions } from '../../../../coordinator/plan/apply-actions.ts';
import type { DriverRolloutPolicy } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import type { NodeBuilder } from './fixtures.ts';
import { aCluster, aNode, aPolicy, actionsOf, planAt, statesOf } from './fixtures.ts';

const pending = (name: string): NodeBuilder => aNode(name).inState('upgrade-required').outdated();
const done = (name: string): NodeBuilder => aNode(name).inState('upgrade-done');
const policy = aPolicy({ maxUnavailable: 1, maxParallelUpgrades: 1 });

/**
 * n1's start planned on nine healthy nodes; then the next pass, on `changed` (each node's builder
 * given the chance to change), with n1's start overlaid and listed as pending, as the shell hands it over.
 */
function nextPassAfterStart(changed: (node: NodeBuilder) => NodeBuilder, next: DriverRolloutPolicy = policy, { sent = false } = {}) {
  const nodes = (): NodeBuilder[] => [pending('n1'), ...['d1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7', 'd8'].map(done)];
  const first = planAt(aCluster(nodes()), policy);
  expect(statesOf(first, 'n1')[0]).toBe('cordon-required');
  const later = aCluster(nodes().map(changed));
  const overlaid = applyActions(sent ? later : { ...later, pendingStarts: ['n1'] }, actionsOf(first, 'n1'));
  return planAt(overlaid, next);
}

describe('a newer pass revokes a start planned earlier and not sent yet', () => {
  it.each([
    ['a third of the pool went NotReady', (n: NodeBuilder) => (['d1', 'd2', 'd3'].includes(n.build().name) ? n.notReady(5) : n), policy, 'pool-not-ready',
      'not started: pool default has 3 of 9 nodes NotReady (a disruption: at least 3 nodes and 20% of the pool); starts resume once the pool is healthy again'],
    ['the node went NotReady', (n: NodeBuilder) => (n.build().name === 'n1' ? n.notReady(5) : n), policy, 'node-not-ready',
      'not started: node NotReady (Ready Unknown: NodeStatusUnknown: Kubelet stopped posting node status.); starts once it is Ready again'],
    ['the rollout was paused', (n: NodeBuilder) => n, aPolicy({ maxUnavailable: 1, maxParallelUpgrades: 1, autoUpgrade: false }), 'paused', 'paused: upgradePolicy.autoUpgrade is false'],
  ] as const)('%s: revoked, naming the hold', (_what, changed, next, code, message) => {
    expect(nextPassAfterStart(changed, next).revokedStarts).toEqual([{ node: 'n1', code, message }]);
  });

  it('nothing changed: kept, though the start fills the only slot', () => {
    expect(nextPassAfterStart((n) => n).revokedStarts).toEqual([]);
  });

  it('pacing counts the start itself: kept', () => {
    const paced = aPolicy({ maxUnavailable: 1, maxParallelUpgrades: 1, minSecondsBetweenStarts: 600 });
    expect(nextPassAfterStart((n) => n, paced).revokedStarts).toEqual([]);
  });

  it('a start already sent is not pending: it runs on in a disrupted pool, like every started node', () => {
    const plan = nextPassAfterStart((n) => (['d1', 'd2', 'd3'].includes(n.build().name) ? n.notReady(5) : n), policy, { sent: true });
    expect(plan.revokedStarts).toEqual([]);
  });
});
