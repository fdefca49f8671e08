/** A node whose driver is current: when a new revision or a request starts it again. */
import { KEYS, aNode, secondsAgo } from '../fixtures.ts';
import { CORDON_AND_ON, DELETE_DRIVER, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  { name: 'current → nothing', node: aNode('n1').inState('upgrade-done'), effects: [] },
  {
    name: 'new DaemonSet revision → upgrade-required → cordon-required → on to the driver restart',
    node: aNode('n1').inState('upgrade-done').outdated(),
    effects: ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON, DELETE_DRIVER],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'upgrade-requested annotation → upgrade-required; the annotation is consumed at the start',
    node: aNode('n1').inState('upgrade-done').annotated({ [KEYS.upgradeRequested]: 'true' }),
    effects: ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON, 'state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    annotations: { [KEYS.upgradeRequested]: null },
  },
  {
    name: 'leftover bookkeeping annotations are removed',
    node: aNode('n1').inState('upgrade-done').annotated({ [KEYS.initialStateUnschedulable]: 'true', [KEYS.drainStartTime]: secondsAgo(9) }),
    effects: [],
    annotations: { [KEYS.initialStateUnschedulable]: null, [KEYS.drainStartTime]: null },
  },
];

specifyTransitions('upgrade-done', CASES);
