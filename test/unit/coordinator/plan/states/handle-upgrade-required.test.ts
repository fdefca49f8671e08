/** A node waiting to start: the limits, the order, and the start itself. */
import { KEYS, aNode, aPod, secondsAgo } from '../fixtures.ts';
import { DRAIN, CORDON_AND_ON, DELETE_DRIVER, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'start records the start time and takes no initial-state mark on a schedulable node',
    node: aNode('n1').inState('upgrade-required').outdated(),
    effects: ['state:cordon-required', ...CORDON_AND_ON, DELETE_DRIVER],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.upgradeStartTime]: secondsAgo(0) },
  },
  {
    name: 'an admin-cordoned node gets the initial-state annotation and no cordon',
    node: aNode('n1').inState('upgrade-required').outdated().cordoned(),
    effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.initialStateUnschedulable]: 'true' },
  },
  {
    name: 'paused (autoUpgrade false) → waits',
    node: aNode('n1').inState('upgrade-required').outdated(),
    policy: { autoUpgrade: false },
    effects: [],
    reason: 'paused',
  },
  {
    name: 'skip label → waits',
    node: aNode('n1').inState('upgrade-required').outdated().labelled({ [KEYS.upgradeSkip]: 'true' }),
    effects: [],
    reason: 'skipped',
  },
  {
    name: 'no parallel slot → waits, naming the pool and the count',
    node: aNode('n1').inState('upgrade-required').outdated(),
    policy: { maxParallelUpgrades: 1 },
    // Outdated: it stays upgrading (its driver pod is restarted), so it hands no slot on.
    others: [aNode('n0').inState('drain-required').cordoned().outdated().with(aPod('w'))],
    effects: [],
    reason: 'no-slot',
    detail: /^no slot: 1\/1 upgrading in pool default$/,
  },
  {
    name: 'no unavailable slot → waits; an admin-cordoned node counts',
    node: aNode('n1').inState('upgrade-required').outdated(),
    policy: { maxUnavailable: 1 },
    others: [aNode('n0').cordoned()],
    effects: [],
    reason: 'no-slot',
    detail: /^no slot: 1\/1 unavailable in pool default$/,
  },
  {
    name: 'a NotReady node counts as unavailable',
    node: aNode('n1').inState('upgrade-required').outdated(),
    policy: { maxUnavailable: 1 },
    others: [aNode('n0').notReady()],
    effects: [],
    reason: 'no-slot',
  },
  {
    name: 'driver became current before the start (rollback) → upgrade-done',
    node: aNode('n1').inState('upgrade-required'),
    effects: ['state:upgrade-done'],
  },
  {
    name: 'a retry after a failed cycle keeps the initial-state annotation and the start time',
    node: aNode('n1')
      .inState('upgrade-required')
      .outdated()
      .cordoned()
      .annotated({ [KEYS.upgradeStartTime]: secondsAgo(3600) }),
    policy: DRAIN,
    effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
    annotations: {},
  },
];

specifyTransitions('upgrade-required', CASES);
