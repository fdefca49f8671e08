/** Waiting for job pods to finish. */
import { KEYS, NOW, aNode, aPod, secondsAgo } from '../fixtures.ts';
import { JOBS, DELETION, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'no podSelector → pod-deletion-required',
    node: aNode('n1').inState('wait-for-jobs-required').outdated().cordoned().with(aPod('job').labelled({ app: 'train' })),
    effects: ['state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'job pods running → waits, records the start time, wakes at the timeout',
    node: aNode('n1')
      .inState('wait-for-jobs-required')
      .outdated()
      .cordoned()
      .with(aPod('a').inNamespace('ml').labelled({ app: 'train' }), aPod('b').inNamespace('ml').labelled({ app: 'train' }), aPod('other')),
    policy: JOBS,
    effects: [],
    reason: 'waiting-for-jobs',
    detail: /^waiting for job pods: ml\/a, ml\/b \(0s of 600s\)$/,
    annotations: { [KEYS.waitForPodCompletionStartTime]: secondsAgo(0) },
    wakeAt: Math.floor(NOW / 1000) * 1000 + 600_000,
  },
  {
    name: 'resumes the recorded start time',
    node: aNode('n1')
      .inState('wait-for-jobs-required')
      .outdated()
      .cordoned()
      .annotated({ [KEYS.waitForPodCompletionStartTime]: secondsAgo(120) })
      .with(aPod('a').inNamespace('ml').labelled({ app: 'train' })),
    policy: JOBS,
    effects: [],
    reason: 'waiting-for-jobs',
    detail: /\(120s of 600s\)$/,
    annotations: {},
  },
  {
    name: 'finished job pods do not hold the node',
    node: aNode('n1')
      .inState('wait-for-jobs-required')
      .outdated()
      .cordoned()
      .annotated({ [KEYS.waitForPodCompletionStartTime]: secondsAgo(30) })
      .with(aPod('a').labelled({ app: 'train' }).inPhase('Succeeded')),
    policy: JOBS,
    effects: ['state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.waitForPodCompletionStartTime]: null },
  },
  {
    name: 'timeout → moves on to pod deletion',
    node: aNode('n1')
      .inState('wait-for-jobs-required')
      .outdated()
      .cordoned()
      .annotated({ [KEYS.waitForPodCompletionStartTime]: secondsAgo(600) })
      .with(aPod('a').labelled({ app: 'train' })),
    policy: { ...JOBS, ...DELETION },
    effects: ['state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'timeoutSeconds 0 waits forever (no wake-up)',
    node: aNode('n1')
      .inState('wait-for-jobs-required')
      .outdated()
      .cordoned()
      .annotated({ [KEYS.waitForPodCompletionStartTime]: secondsAgo(86_400) })
      .with(aPod('a').labelled({ app: 'train' })),
    policy: { waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 0 } },
    effects: [],
    reason: 'waiting-for-jobs',
    detail: /\(86400s, no timeout\)$/,
    wakeAt: null,
  },
];

specifyTransitions('wait-for-jobs-required', CASES);
