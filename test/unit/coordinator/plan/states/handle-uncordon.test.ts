/** The uncordon, unless an admin cordoned the node. */
import { KEYS, aNode, secondsAgo } from '../fixtures.ts';
import { specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'uncordon → upgrade-done; cycle annotations removed',
    node: aNode('n1').inState('uncordon-required').cordoned().annotated({ [KEYS.upgradeStartTime]: secondsAgo(600) }),
    effects: ['uncordon', 'state:upgrade-done'],
    annotations: { [KEYS.upgradeStartTime]: null },
  },
  {
    name: 'cordoned by an admin before the upgrade → stays cordoned',
    node: aNode('n1').inState('uncordon-required').cordonedByAdmin(),
    effects: ['state:upgrade-done'],
    annotations: { [KEYS.initialStateUnschedulable]: null },
  },
];

specifyTransitions('uncordon-required', CASES);
