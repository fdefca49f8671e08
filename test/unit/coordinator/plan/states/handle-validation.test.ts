/** Waiting for the validation pods. */
import { KEYS, NOW, aNode, aPod, secondsAgo } from '../fixtures.ts';
import { VALIDATION, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'a safe-load annotation re-set by a restarted driver pod is cleared (as upstream), the node keeps validating',
    node: aNode('n1').inState('validation-required').cordoned().waitingForSafeLoad().annotated({ [KEYS.validationStartTime]: secondsAgo(5) }).with(aPod('v').labelled({ app: 'nvidia-operator-validator' }).notReady()),
    policy: VALIDATION,
    effects: ['clearSafeLoad'],
    reason: 'waiting-for-validation',
    annotations: { [KEYS.waitForSafeLoad]: null },
  },
  {
    name: 'validator pods Ready → uncordon-required → upgrade-done',
    node: aNode('n1').inState('validation-required').cordoned().annotated({ [KEYS.validationStartTime]: secondsAgo(5) }).with(aPod('v').labelled({ app: 'nvidia-operator-validator' }).ownedBy('DaemonSet')),
    policy: VALIDATION,
    effects: ['state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    annotations: { [KEYS.validationStartTime]: null },
  },
  {
    name: 'validator not Ready → waits with the start time recorded',
    node: aNode('n1').inState('validation-required').cordoned().with(aPod('v').labelled({ app: 'nvidia-operator-validator' }).notReady()),
    policy: VALIDATION,
    effects: [],
    reason: 'waiting-for-validation',
    annotations: { [KEYS.validationStartTime]: secondsAgo(0) },
    wakeAt: Math.floor(NOW / 1000) * 1000 + 600_000,
  },
  {
    name: 'no validator pod yet → waits',
    node: aNode('n1').inState('validation-required').cordoned(),
    policy: VALIDATION,
    effects: [],
    reason: 'waiting-for-validation',
    detail: /no validator pod/,
  },
  {
    name: 'configurable timeout → upgrade-failed',
    node: aNode('n1').inState('validation-required').cordoned().annotated({ [KEYS.validationStartTime]: secondsAgo(120) }),
    policy: { validation: { podSelector: 'app=nvidia-operator-validator', timeoutSeconds: 120 } },
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: /^validation timed out after 120s/,
  },
];

specifyTransitions('validation-required', CASES);
