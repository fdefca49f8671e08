/** A failed node: what holds it, and how it leaves. */
import { KEYS, aNode, aPod, secondsAgo } from '../fixtures.ts';
import { NO_DELETION, DRAIN, VALIDATION, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'a newer driver revision than the one it failed at → retried by itself (Warning), the failed revision kept',
    node: aNode('n1').inState('upgrade-failed').cordoned().outdated().annotated({ [KEYS.failedRevision]: 'gpu-driver=rev-old', [KEYS.upgradeStartTime]: secondsAgo(900) }),
    effects: ['state:upgrade-required', 'state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.failedRevision]: undefined },
  },
  {
    name: 'failed at the revision that is still the newest → stays failed',
    node: aNode('n1').inState('upgrade-failed').cordoned().outdated().annotated({ [KEYS.failedRevision]: 'gpu-driver=rev-new' }),
    effects: [],
    reason: 'upgrade-failed',
    detail: /or push a new driver revision$/,
  },
  {
    name: 'halted: a failed node retried on a new revision still starts (it is already counted); a fresh node does not',
    node: aNode('n1').inState('upgrade-failed').cordoned().outdated().annotated({ [KEYS.failedRevision]: 'gpu-driver=rev-old' }),
    others: [aNode('n2').inState('upgrade-done').outdated()],
    rest: { maxFailedNodes: 1 },
    effects: ['state:upgrade-required', 'state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
    otherReasons: { n2: 'halted' },
  },
  {
    name: 'driver still not Ready → stays, reason kept',
    node: aNode('n1').inState('upgrade-failed').cordoned().driverNotReady(20).annotated({ [KEYS.upgradeReason]: 'drain timed out after 300s' }),
    effects: [],
    reason: 'upgrade-failed',
    detail: /^drain timed out after 300s; relabel/,
    annotations: {},
  },
  {
    name: 'driver pod current and Ready → leaves by itself, uncordoned',
    node: aNode('n1').inState('upgrade-failed').cordoned(),
    effects: ['state:uncordon-required', 'uncordon', 'state:upgrade-done'],
  },
  {
    name: 'after a validation timeout it stays failed until the validator pods are Ready',
    node: aNode('n1').inState('upgrade-failed').cordoned().with(aPod('v').labelled({ app: 'nvidia-operator-validator' }).notReady()),
    policy: VALIDATION,
    effects: [],
    reason: 'upgrade-failed',
  },
  {
    name: 'validator pods Ready again → leaves failed',
    node: aNode('n1').inState('upgrade-failed').cordoned().with(aPod('v').labelled({ app: 'nvidia-operator-validator' })),
    policy: VALIDATION,
    effects: ['state:uncordon-required', 'uncordon', 'state:upgrade-done'],
  },
  {
    name: 'an admin-cordoned node leaves failed without being uncordoned',
    node: aNode('n1').inState('upgrade-failed').cordonedByAdmin(),
    effects: ['state:uncordon-required', 'state:upgrade-done'],
  },
  {
    name: 'out-of-date pod stays failed (retry is explicit)',
    node: aNode('n1').inState('upgrade-failed').cordoned().outdated(),
    effects: [],
    reason: 'upgrade-failed',
  },
  {
    name: 'a retry does not inherit step timers an earlier attempt left behind',
    node: aNode('n1')
      .inState('upgrade-required')
      .outdated()
      .cordoned()
      .annotated({ [KEYS.upgradeStartTime]: secondsAgo(3600), [KEYS.drainStartTime]: secondsAgo(3000), [KEYS.validationStartTime]: secondsAgo(3000) })
      .with(aPod('web')),
    policy: { ...DRAIN, ...NO_DELETION },
    effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:drain-required', 'evictPod:work/web'],
    reason: 'waiting-for-eviction',
    annotations: { [KEYS.drainStartTime]: secondsAgo(0), [KEYS.validationStartTime]: null },
  },
  {
    name: 'upgrade-requested annotation → retried',
    node: aNode('n1').inState('upgrade-failed').cordoned().outdated().annotated({ [KEYS.upgradeRequested]: 'true', [KEYS.upgradeStartTime]: secondsAgo(900) }),
    effects: ['state:upgrade-required', 'state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
];

specifyTransitions('upgrade-failed', CASES);
