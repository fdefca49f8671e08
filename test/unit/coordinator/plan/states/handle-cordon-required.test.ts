/** The cordon, and the admin cordon kept. */
import { aNode } from '../fixtures.ts';
import { DELETION, gpuPod, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'schedulable → cordon, then the next steps from the pods seen, behind a check that they are still there once the cordon is stored',
    node: aNode('n1').inState('cordon-required').outdated().with(gpuPod('train')),
    policy: DELETION,
    effects: ['cordon', 'requireSamePods', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'evictPod:work/train'],
    reason: 'waiting-for-pod-deletion',
  },
  {
    name: 'already cordoned → moves on in the same pass',
    node: aNode('n1').inState('cordon-required').outdated().cordoned().with(gpuPod('train')),
    policy: DELETION,
    effects: ['state:wait-for-jobs-required', 'state:pod-deletion-required', 'evictPod:work/train'],
    reason: 'waiting-for-pod-deletion',
  },
];

specifyTransitions('cordon-required', CASES);
