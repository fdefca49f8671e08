/** Emergency stop (upgradePolicy.stop): nodes in each kind of state, frozen where they are. */
import { KEYS, aNode, aPod, secondsAgo } from './fixtures.ts';
import { DRAIN, STOP, specifyTransitions, type TransitionCase } from './states/transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'draining: nothing is evicted, the node stays, reason stopped, the drain timer is dropped',
    node: aNode('n1').inState('drain-required').outdated().cordoned().annotated({ [KEYS.drainStartTime]: secondsAgo(100) }).with(aPod('web')),
    policy: { ...STOP, ...DRAIN },
    effects: [],
    reason: 'stopped',
    annotations: { [KEYS.drainStartTime]: null },
    wakeAt: null,
  },
  {
    name: 'pod-restart-required with an out-of-date pod: the driver pod is not restarted',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned(),
    policy: STOP,
    effects: [],
    reason: 'stopped',
  },
  {
    name: 'uncordon-required: stays cordoned',
    node: aNode('n1').inState('uncordon-required').cordoned(),
    policy: STOP,
    effects: [],
    reason: 'stopped',
  },
  {
    name: 'a new revision: labelled upgrade-required, does not start',
    node: aNode('n1').inState('upgrade-done').outdated(),
    policy: STOP,
    effects: ['state:upgrade-required'],
    reason: 'stopped',
  },
  {
    name: 'upgrade-failed keeps its failure as the reason and does not leave, even when Ready',
    node: aNode('n1').inState('upgrade-failed').cordoned().annotated({ [KEYS.upgradeReason]: 'drain timed out after 300s: x' }),
    policy: STOP,
    effects: [],
    reason: 'upgrade-failed',
    detail: /^drain timed out after 300s: x \(stopped: /,
  },
  {
    name: 'cleared: resumes where it stopped, the drain timer starting afresh',
    node: aNode('n1').inState('drain-required').outdated().cordoned().with(aPod('web')),
    policy: DRAIN,
    effects: ['evictPod:work/web'],
    reason: 'waiting-for-eviction',
    annotations: { [KEYS.drainStartTime]: secondsAgo(0) },
  },
];

specifyTransitions('any state, with upgradePolicy.stop', CASES);
