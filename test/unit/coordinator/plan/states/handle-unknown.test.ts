/** A node without a state label (new, or labelled by hand): where it starts. */
import { aNode } from '../fixtures.ts';
import { CORDON_AND_ON, DELETE_DRIVER, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  { name: 'current driver pod → upgrade-done', node: aNode('n1'), effects: ['state:upgrade-done'] },
  {
    name: 'out-of-date driver pod → upgrade-required, starts, is cordoned and moves on to the driver restart',
    node: aNode('n1').outdated(),
    effects: ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON, DELETE_DRIVER],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'safe-load annotation with a current pod → upgrade-required, cordoned, the load released, uncordoned',
    node: aNode('n1').waitingForSafeLoad(),
    effects: ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON, 'clearSafeLoad', 'state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
  },
  { name: 'no driver pod → waits', node: aNode('n1').withoutDriverPod(), effects: [], reason: 'no-driver-pod' },
];

specifyTransitions('unknown', CASES);
