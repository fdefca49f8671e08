/** Replacing the driver pod and waiting for the new one. */
import { describe, expect, it } from 'vitest';
import { KEYS, NOW, aCluster, aNode, aPod, aPolicy, annotationWrites, planAt, reasonOf, secondsAgo } from '../fixtures.ts';
import { VALIDATION, gpuPod, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
  {
    name: 'out-of-date driver pod → deleted',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned(),
    effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'old pod terminating, no new one yet → waits',
    node: aNode('n1').inState('pod-restart-required').outdated().driverTerminating().cordoned(),
    effects: [],
    reason: 'waiting-for-driver-pod',
    detail: /DaemonSet to create the driver pod/,
  },
  {
    name: 'new pod not Ready → waits',
    node: aNode('n1').inState('pod-restart-required').driverNotReady(3).cordoned(),
    effects: [],
    reason: 'waiting-for-driver-pod',
    detail: /\(3 restarts\)$/,
  },
  {
    name: 'new pod not Ready after more than 10 restarts → upgrade-failed',
    node: aNode('n1').inState('pod-restart-required').driverNotReady(11).cordoned(),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
  },
  {
    name: 'new pod Ready, no validation → validation-required (passed) → uncordon-required → upgrade-done',
    node: aNode('n1').inState('pod-restart-required').cordoned(),
    effects: ['state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
  },
  {
    name: 'new pod Ready, validation configured → validation-required',
    node: aNode('n1').inState('pod-restart-required').cordoned(),
    policy: VALIDATION,
    effects: ['state:validation-required'],
    reason: 'waiting-for-validation',
  },
  {
    name: 'safe load: current pod → the annotation is removed instead of deleting the pod',
    node: aNode('n1').inState('pod-restart-required').waitingForSafeLoad().driverNotReady().cordoned(),
    effects: ['clearSafeLoad'],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.waitForSafeLoad]: null },
  },
  {
    name: 'safe load with an out-of-date pod → the pod is replaced first, the annotation stays',
    node: aNode('n1').inState('pod-restart-required').waitingForSafeLoad().outdated().cordoned(),
    effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'a pod still using the device → the driver restart is held, naming the pod',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().with(gpuPod('train')),
    effects: [],
    reason: 'device-in-use',
    detail: /^driver restart held: work\/train still uses the device \(0s of 900s\)$/,
  },
  {
    name: 'a device pod still terminating also holds the restart; a safe load is not released under it either',
    node: aNode('n1').inState('pod-restart-required').waitingForSafeLoad().driverNotReady().cordoned().with(gpuPod('leaving').terminating()),
    effects: [],
    reason: 'device-in-use',
    annotations: { [KEYS.waitForSafeLoad]: undefined },
  },
  {
    name: 'a device pod still there at podRestart.timeoutSeconds → upgrade-failed naming it',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(900) }).with(aPod('static').mirror().requesting('nvidia.com/gpu')),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: /driver restart held: work\/static still uses the device/,
  },
  {
    name: 'the restart’s start time is recorded when the state begins, with a wake-up at podRestart.timeoutSeconds',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned(),
    effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.podRestartStartTime]: secondsAgo(0) },
    wakeAt: Math.floor(NOW / 1000) * 1000 + 900_000,
  },
  {
    name: 'the agent reports a failure → waits with its reason and message; the failure’s start is recorded',
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(200) }).driverFailing('CompileFailed', 'Failed: nvidia.ko: error: implicit declaration'),
    effects: [],
    reason: 'driver-failing',
    detail: /failing: CompileFailed: Failed: nvidia\.ko: error: implicit declaration \(0s of 120s\)$/,
    annotations: { [KEYS.driverFailingSince]: secondsAgo(0) },
    wakeAt: Math.floor(NOW / 1000) * 1000 + 120_000,
  },
  ...(['CompileFailed', 'KernelHeadersMissing', 'LoadFailed', 'DriverInUse', 'VerifyFailed', 'FirmwareMissing'] as const).map((why): TransitionCase => ({
    name: `${why} reported for podRestart.failAfterSeconds → upgrade-failed with the agent’s message`,
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(130), [KEYS.driverFailingSince]: secondsAgo(120) }).driverFailing(why, `Failed: ${why} on this node`),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: new RegExp(`^driver pod gpu-operator/gpu-driver-n1 failed: ${why}: Failed: ${why} on this node;`),
    annotations: { [KEYS.podRestartStartTime]: null, [KEYS.driverFailingSince]: null },
  })),
  {
    name: 'RebootRequired (a never-unload module) → upgrade-failed at once, saying the node needs a reboot',
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(30) }).driverFailing('RebootRequired', 'Failed: reboot required: nvidia is set never to unload'),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: /^node needs a reboot: driver pod gpu-operator\/gpu-driver-n1: Failed: reboot required: nvidia is set never to unload/,
  },
  {
    name: 'a failure seen before, the agent retrying now (Building) → still waits; the failure’s start is kept',
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(300), [KEYS.driverFailingSince]: secondsAgo(200) }).driverNotReady(),
    effects: [],
    reason: 'waiting-for-driver-pod',
    annotations: { [KEYS.driverFailingSince]: undefined },
  },
  {
    name: 'failAfterSeconds 0 never fails on the agent’s reason alone',
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(300) }).driverFailing('CompileFailed', 'Failed: make exited with 2'),
    policy: { podRestart: { failAfterSeconds: 0 } },
    effects: [],
    reason: 'driver-failing',
    annotations: { [KEYS.driverFailingSince]: undefined },
  },
  {
    name: 'Ready after a failure → moves on; both timers are removed',
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(300), [KEYS.driverFailingSince]: secondsAgo(100) }),
    effects: ['state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    annotations: { [KEYS.podRestartStartTime]: null, [KEYS.driverFailingSince]: null },
  },
  {
    name: 'no Ready pod after podRestart.timeoutSeconds (image pull error) → upgrade-failed naming the kubelet’s reason',
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(900) }).driverWaiting('agent: ImagePullBackOff: Back-off pulling image "driver:v3"'),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: /^no Ready driver pod 900s after the restart began: gpu-operator\/gpu-driver-n1 agent: ImagePullBackOff/,
  },
  {
    name: 'an init container crash loop counts as restarts (upstream’s rule) and names the init container',
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(60) }).driverWaiting('init container wait: CrashLoopBackOff: back-off 5m0s').driverNotReady(11),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: /is not Ready after 11 restarts/,
  },
  {
    name: 'the old pod still terminating at podRestart.timeoutSeconds → upgrade-failed',
    node: aNode('n1').inState('pod-restart-required').outdated().driverTerminating().cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(901) }),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: /has not created one/,
  },
  {
    name: 'podRestart.timeoutSeconds 0 waits forever',
    node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(86_400) }).driverWaiting('agent: ErrImagePull: not found'),
    policy: { podRestart: { timeoutSeconds: 0 } },
    effects: [],
    reason: 'waiting-for-driver-pod',
    detail: /ErrImagePull: not found \(86400s, no timeout\)/,
    wakeAt: null,
  },
];

specifyTransitions('pod-restart-required', CASES);

/**
 * A restart running its normal course (old pod deleted, no new pod yet, new pod starting) keeps
 * one reason text, so it costs no Node write beyond its state change
 * (docs/decisions/0003-fewer-writes-per-node.md); the pod names are in the detail. A pod stuck in
 * a kubelet waiting reason gets a text of its own.
 */
describe('the reason while the driver pod restarts', () => {
  const TEXT = 'restarting the driver pod (timeout 900s)';
  const phases = {
    'old pod still there': aNode('n1').inState('pod-restart-required').outdated().cordoned(),
    'old pod terminating, no new one yet': aNode('n1').inState('pod-restart-required').outdated().driverTerminating().cordoned(),
    'no driver pod at all': aNode('n1').inState('pod-restart-required').withoutDriverPod().cordoned(),
    'new pod starting': aNode('n1').inState('pod-restart-required').driverNotReady().cordoned(),
  };

  it.each(Object.entries(phases))('%s: the same text, so no reason write', (_phase, node) => {
    const plan = planAt(aCluster([node.annotated({ [KEYS.upgradeReason]: TEXT, [KEYS.podRestartStartTime]: secondsAgo(1) })]), aPolicy({}));
    expect(reasonOf(plan, 'n1')?.message).toBe(TEXT);
    expect(annotationWrites(plan, 'n1')[KEYS.upgradeReason]).toBeUndefined();
  });

  it('the details still name the pods', () => {
    const deleting = planAt(aCluster([phases['old pod still there']]), aPolicy({}));
    expect(reasonOf(deleting, 'n1')?.detail).toMatch(/^deleting out-of-date driver pod gpu-operator\/gpu-driver-n1 /);
    const starting = planAt(aCluster([phases['new pod starting']]), aPolicy({}));
    expect(reasonOf(starting, 'n1')?.detail).toMatch(/^waiting for driver pod gpu-operator\/gpu-driver-n1 to become Ready /);
  });

  it('a new pod stuck in a kubelet waiting reason is named with it in the text', () => {
    const node = aNode('n1').inState('pod-restart-required').driverWaiting('agent: ImagePullBackOff: no such image').cordoned().annotated({ [KEYS.upgradeReason]: TEXT });
    const plan = planAt(aCluster([node]), aPolicy({}));
    expect(reasonOf(plan, 'n1')?.message).toBe('waiting for the driver pod to become Ready: gpu-operator/gpu-driver-n1 agent: ImagePullBackOff: no such image (timeout 900s)');
    expect(annotationWrites(plan, 'n1')[KEYS.upgradeReason]).toBe(reasonOf(plan, 'n1')?.message);
  });
});
