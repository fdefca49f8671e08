/** Two drivers on one node: one driver's upgrade leaves the node cordoned for the other's. */
import { KEYS, aNode } from './fixtures.ts';
import { OFED, specifyTransitions, type TransitionCase } from './states/transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'uncordon-required while ofed still drains → upgrade-done, left cordoned for ofed',
    node: aNode('n1').inState('uncordon-required').cordoned().labelled({ [OFED.upgradeState]: 'drain-required' }),
    effects: ['state:upgrade-done'],
  },
  {
    name: 'uncordon-required while ofed is failed → left cordoned',
    node: aNode('n1').inState('uncordon-required').cordoned().labelled({ [OFED.upgradeState]: 'upgrade-failed' }),
    effects: ['state:upgrade-done'],
  },
  {
    name: 'uncordon-required while ofed is finishing too (uncordon-required) → uncordon',
    node: aNode('n1').inState('uncordon-required').cordoned().labelled({ [OFED.upgradeState]: 'uncordon-required' }),
    effects: ['uncordon', 'state:upgrade-done'],
  },
  {
    name: 'a driver of another domain counts too',
    node: aNode('n1').inState('uncordon-required').cordoned().labelled({ 'example.com/nic-driver-upgrade-state': 'pod-restart-required' }),
    effects: ['state:upgrade-done'],
  },
  {
    name: 'starting on a node ofed cordoned for its upgrade: not an admin cordon',
    node: aNode('n1').inState('upgrade-required').outdated().cordoned().labelled({ [OFED.upgradeState]: 'drain-required' }),
    effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.initialStateUnschedulable]: undefined },
  },
  {
    name: 'starting on a node ofed found cordoned by an admin: an admin cordon',
    node: aNode('n1')
      .inState('upgrade-required')
      .outdated()
      .cordoned()
      .labelled({ [OFED.upgradeState]: 'drain-required' })
      .annotated({ [OFED.initialStateUnschedulable]: 'true' }),
    effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.initialStateUnschedulable]: 'true' },
  },
];

specifyTransitions('gpu, with ofed on the same node', CASES);
