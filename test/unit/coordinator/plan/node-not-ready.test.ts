/**
 * A node that turns NotReady mid-upgrade (coordinator/plan/node-not-ready.ts): its kubelet cannot
 * show the driver Ready, so from the driver restart on it does not move; it goes on when Ready
 * again, and fails, naming NotReady, when it stays NotReady longer than podRestart.failAfterSeconds.
 */
import { describe, expect, it } from 'vitest';
import type { ReasonCode } from '../../../../coordinator/plan/action.ts';
import { KEYS, NOW, aCluster, aNode, aPod, aPolicy, annotationWrites, effectsOf, planAt, reasonOf, secondsAgo, type NodeBuilder, type UpgradePolicyInput } from './fixtures.ts';

interface Case {
  readonly name: string;
  readonly node: NodeBuilder;
  readonly policy?: UpgradePolicyInput;
  readonly others?: readonly NodeBuilder[];
  /** Exactly these effects on n1, in order. */
  readonly effects: readonly string[];
  readonly reason?: ReasonCode;
  /** n1's reason message (stable text) matches. */
  readonly message?: RegExp;
  /** The reason annotation written on n1 matches (a failure's reason). */
  readonly failure?: RegExp;
  readonly wakeAt?: number | null;
}

/** podRestart as the chaos scenario sets it: the node fails 30 s after its agent (or its Ready condition) says it is failing. */
const FAIL_AFTER_30 = { podRestart: { timeoutSeconds: 600, failAfterSeconds: 30 } } as const;
const VALIDATION = { validation: { podSelector: 'app=validator', timeoutSeconds: 600 } } as const;
const validator = aPod('v').labelled({ app: 'validator' });

const cases: readonly Case[] = [
  {
    name: 'pod-restart-required, out-of-date pod: the driver pod is not deleted (no kubelet would confirm it gone or start the new one)',
    node: aNode('n1').inState('pod-restart-required').cordoned().outdated().notReady(10),
    policy: FAIL_AFTER_30,
    effects: [],
    reason: 'node-not-ready',
    message: /^node NotReady \(Ready Unknown: NodeStatusUnknown: Kubelet stopped posting node status\.\): held in pod-restart-required until it is Ready again \(fails the node after 30s NotReady\)$/,
    wakeAt: NOW + 20_000,
  },
  {
    name: 'pod-restart-required, safe load: the annotation is not removed',
    node: aNode('n1').inState('pod-restart-required').cordoned().waitingForSafeLoad().driverNotReady().notReady(10),
    policy: FAIL_AFTER_30,
    effects: [],
    reason: 'node-not-ready',
  },
  {
    name: 'pod-restart-required, current pod Ready (a stale status): no move to uncordon-required',
    node: aNode('n1').inState('pod-restart-required').cordoned().notReady(10),
    policy: FAIL_AFTER_30,
    effects: [],
    reason: 'node-not-ready',
  },
  {
    name: 'validation-required, validators Ready (stale): no move to uncordon-required',
    node: aNode('n1').inState('validation-required').cordoned().with(validator).notReady(10),
    policy: { ...FAIL_AFTER_30, ...VALIDATION },
    effects: [],
    reason: 'node-not-ready',
    message: /held in validation-required/,
  },
  {
    name: 'uncordon-required: not uncordoned, not upgrade-done',
    node: aNode('n1').inState('uncordon-required').cordoned().notReady(10),
    policy: FAIL_AFTER_30,
    effects: [],
    reason: 'node-not-ready',
    message: /held in uncordon-required/,
  },
  {
    name: 'NotReady longer than podRestart.failAfterSeconds → upgrade-failed, the reason naming NotReady and its condition',
    node: aNode('n1').inState('uncordon-required').cordoned().notReady(31),
    policy: FAIL_AFTER_30,
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    failure: /^node NotReady for 31s \(limit 30s\) in uncordon-required: Ready Unknown: NodeStatusUnknown: Kubelet stopped posting node status\.; its kubelet cannot show the driver Ready$/,
  },
  {
    name: 'the bound counts from the condition (lastTransitionTime), so a node NotReady before the state fails at once',
    node: aNode('n1').inState('pod-restart-required').cordoned().outdated().notReady(3_600).annotated({ [KEYS.podRestartStartTime]: secondsAgo(1) }),
    policy: FAIL_AFTER_30,
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    failure: /^node NotReady for 3600s \(limit 30s\) in pod-restart-required/,
  },
  {
    name: 'failAfterSeconds 0: podRestart.timeoutSeconds bounds it',
    node: aNode('n1').inState('uncordon-required').cordoned().notReady(100),
    policy: { podRestart: { timeoutSeconds: 90, failAfterSeconds: 0 } },
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    failure: /limit 90s/,
  },
  {
    name: 'both 0: it waits, saying there is no time limit',
    node: aNode('n1').inState('uncordon-required').cordoned().notReady(100_000),
    policy: { podRestart: { timeoutSeconds: 0, failAfterSeconds: 0 } },
    effects: [],
    reason: 'node-not-ready',
    message: /no time limit: podRestart\.failAfterSeconds and timeoutSeconds are 0/,
    wakeAt: null,
  },
  {
    name: 'no lastTransitionTime: it waits without a bound, saying so',
    node: aNode('n1').inState('uncordon-required').cordoned().notReady(),
    policy: FAIL_AFTER_30,
    effects: [],
    reason: 'node-not-ready',
    message: /^node NotReady \(Ready not True\): .*no time limit: the condition has no lastTransitionTime/,
  },
  {
    name: 'upgrade-failed with a current, Ready driver pod: does not recover while NotReady',
    node: aNode('n1').inState('upgrade-failed').cordoned().notReady(10).annotated({ [KEYS.upgradeReason]: 'node NotReady for 31s (limit 30s) in uncordon-required' }),
    policy: FAIL_AFTER_30,
    effects: [],
    reason: 'upgrade-failed',
  },
  {
    name: 'upgrade-failed, Ready again with a Ready driver pod → recovers and finishes',
    node: aNode('n1').inState('upgrade-failed').cordoned(),
    policy: FAIL_AFTER_30,
    effects: ['state:uncordon-required', 'uncordon', 'state:upgrade-done'],
  },
  {
    name: 'Ready again in uncordon-required → uncordoned, upgrade-done',
    node: aNode('n1').inState('uncordon-required').cordoned(),
    policy: FAIL_AFTER_30,
    effects: ['uncordon', 'state:upgrade-done'],
  },
  {
    name: 'the steps before the driver restart go on: a NotReady node is cordoned and moves on to the driver restart, where it is held …',
    node: aNode('n1').inState('cordon-required').outdated().notReady(10),
    policy: FAIL_AFTER_30,
    effects: ['cordon', 'requireSamePods', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required'],
    reason: 'node-not-ready',
  },
  {
    name: '… and its device pods are evicted (their controllers replace them elsewhere)',
    node: aNode('n1').inState('pod-deletion-required').cordoned().outdated().notReady(10).with(aPod('w').requesting('nvidia.com/gpu')),
    policy: { ...FAIL_AFTER_30, podDeletion: {} },
    effects: ['evictPod:work/w'],
    reason: 'waiting-for-pod-deletion',
  },
  {
    name: 'a node that reaches pod-restart-required NotReady in the same pass stops there',
    node: aNode('n1').inState('wait-for-jobs-required').cordoned().outdated().notReady(10),
    policy: FAIL_AFTER_30,
    effects: ['state:pod-deletion-required', 'state:pod-restart-required'],
    reason: 'node-not-ready',
  },
];

describe('a NotReady node mid-upgrade', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const plan = planAt(aCluster([c.node, ...(c.others ?? [])]), aPolicy(c.policy ?? {}));
    expect(effectsOf(plan, 'n1')).toEqual(c.effects);
    const reason = reasonOf(plan, 'n1');
    expect(reason?.code).toBe(c.reason);
    if (c.message !== undefined) expect(reason?.message).toMatch(c.message);
    if (c.failure !== undefined) expect(annotationWrites(plan, 'n1')[KEYS.upgradeReason]).toMatch(c.failure);
    if (c.wakeAt !== undefined) expect(plan.nextWakeAt).toBe(c.wakeAt);
  });

  it('counts as unavailable while held: a second node of its pool (maxUnavailable 1) does not start', () => {
    const plan = planAt(
      aCluster([aNode('n1').inState('uncordon-required').cordoned().notReady(10), aNode('n2').inState('upgrade-required').outdated()]),
      aPolicy({ ...FAIL_AFTER_30, maxUnavailable: 1 }),
    );
    expect(effectsOf(plan, 'n2')).toEqual([]);
    expect(reasonOf(plan, 'n2')?.code).toBe('no-slot');
  });

  it('the emergency stop comes first: a stopped NotReady node says stopped and does not fail', () => {
    const plan = planAt(aCluster([aNode('n1').inState('uncordon-required').cordoned().notReady(3_600)]), aPolicy({ ...FAIL_AFTER_30, stop: true }));
    expect(effectsOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')?.code).toBe('stopped');
  });
});
