import { describe, expect, it } from 'vitest';
import {
  adminCordoned,
  allowedUnavailable,
  blockedByLimit,
  cordonLostViolation,
  type CordonWatch,
  haltedByBudget,
  isJoining,
  neverDisruptedRemoval,
  limitViolations,
  operandLabelsOf,
  poolOf,
  protectedPodRemoval,
  readRollout,
  readSelectorString,
  selects,
  settledViolations,
  type ObservedNode,
  type ObservedPod,
} from '../../observer/rollout-promises.ts';

const KEY = 'nvidia.com/gpu-driver-upgrade-state';
const node = (name: string, state: string, extra: Partial<ObservedNode> = {}): ObservedNode => ({
  name,
  labels: { [KEY]: state, ...extra.labels },
  annotations: extra.annotations ?? {},
  unschedulable: extra.unschedulable ?? false,
  ready: extra.ready ?? true,
  ...(extra.joining === undefined ? {} : { joining: extra.joining }),
});
const rollout = readRollout({
  driverName: 'gpu',
  upgradePolicy: { maxUnavailable: 1, maxParallelUpgrades: 0 },
  pools: [{ name: 'a', nodeSelector: { matchLabels: { pool: 'a' } }, maxUnavailable: '34%' }, { name: 'b', nodeSelector: { matchExpressions: [{ key: 'gpu', operator: 'Exists' }] } }],
});

describe('the observer’s own reading of a rollout', () => {
  it.each([
    [1, 10, 1], ['0%', 10, 0], ['1%', 10, 1], ['25%', 10, 3], ['34%', 3, 2], ['100%', 7, 7], ['50%', 0, 0],
  ] as const)('maxUnavailable %s of %i nodes allows %i (percentages round up)', (value, total, allowed) => {
    expect(allowedUnavailable(value, total)).toBe(allowed);
  });

  it('defaults as documented: 25% unavailable, one upgrade at a time', () => {
    expect(readRollout({ driverName: 'gpu' }).defaultPool).toMatchObject({ maxUnavailable: '25%', maxParallelUpgrades: 1 });
  });

  it('matches label selectors like the API server', () => {
    expect(selects({}, {})).toBe(true);
    expect(selects({ matchExpressions: [{ key: 'x', operator: 'NotIn', values: ['a'] }] }, {})).toBe(true);
    expect(selects({ matchExpressions: [{ key: 'x', operator: 'In', values: ['a'] }] }, {})).toBe(false);
    expect(selects({ matchExpressions: [{ key: 'x', operator: 'DoesNotExist' }] }, { x: '' })).toBe(false);
  });

  it('puts a node in no pool at all when two pools match it, in the default pool when none does', () => {
    expect(poolOf(node('n', 'upgrade-done', { labels: { pool: 'a', gpu: 'y' } }), rollout)).toBeNull();
    expect(poolOf(node('n', 'upgrade-done', { labels: { pool: 'a' } }), rollout)).toBe('a');
    expect(poolOf(node('n', 'upgrade-done'), rollout)).toBe('default');
  });
});

describe('the limits across one change', () => {
  const pool = (states: string[], extra: Partial<ObservedNode>[] = []) => states.map((s, i) => node(`n${i}`, s, { ...extra[i], labels: { pool: 'a', ...extra[i]?.labels } }));

  it('flags a pool taken above its limit (34% of 3 = 2) by the rollout', () => {
    const before = pool(['cordon-required', 'upgrade-required', 'upgrade-required']);
    const after = pool(['cordon-required', 'cordon-required', 'cordon-required']);
    expect(limitViolations(before, after, rollout)).toEqual(['pool a: 3 of 3 nodes out of service, maxUnavailable 34% allows 2 (n0 cordon-required, n1 cordon-required, n2 cordon-required)']);
  });

  it('counts NotReady nodes as out of service, but does not blame the rollout for a node turning NotReady', () => {
    const before = pool(['upgrade-required', 'upgrade-required', 'upgrade-required'], [{ ready: false }, { ready: false }]);
    const started = pool(['upgrade-required', 'upgrade-required', 'cordon-required'], [{ ready: false }, { ready: false }]);
    expect(limitViolations(before, started, rollout)).toHaveLength(1);
    const worldOnly = pool(['upgrade-done', 'upgrade-done', 'upgrade-done'], [{ ready: false }, { ready: false }, { ready: false }]);
    expect(limitViolations(pool(['upgrade-done', 'upgrade-done', 'upgrade-done']), worldOnly, rollout)).toEqual([]);
  });

  it('leaves a joining node (added NotReady, never seen Ready) out of the pool: a start it could not know of took nothing from it', () => {
    // Chaos node-churn, seed 684843: n0 started as n1 joined; 34% of 2 would allow 1, of 1 allows 1.
    const before = pool(['upgrade-done', 'unknown'], [{}, { ready: false, joining: true }]);
    const after = pool(['cordon-required', 'unknown'], [{}, { ready: false, joining: true }]);
    expect(limitViolations(before, after, rollout)).toEqual([]);
    const notReadyMember = pool(['cordon-required', 'unknown'], [{}, { ready: false }]);
    expect(limitViolations(pool(['upgrade-done', 'unknown'], [{}, { ready: false }]), notReadyMember, rollout)).toEqual([
      'pool a: 2 of 2 nodes out of service, maxUnavailable 34% allows 1 (n0 cordon-required, n1 NotReady)',
    ]);
  });

  it('takes a node for joining from its ADDED event until it is first seen Ready', () => {
    expect(isJoining(undefined, false, true)).toBe(true);
    expect(isJoining(undefined, false, false)).toBe(false);
    const joining = node('n', 'unknown', { ready: false, joining: true });
    expect(isJoining(joining, false, false)).toBe(true);
    expect(isJoining(joining, true, false)).toBe(false);
    expect(isJoining(node('n', 'unknown', { ready: true }), false, false)).toBe(false);
  });

  it('does not blame the rollout for another driver\'s cordon (a second release starting the node)', () => {
    const before = pool(['cordon-required', 'upgrade-done', 'upgrade-done']);
    const ofed = (state: string) => ({ unschedulable: true, labels: { pool: 'a', 'nvidia.com/ofed-driver-upgrade-state': state } });
    expect(limitViolations(before, pool(['cordon-required', 'upgrade-done', 'upgrade-done'], [{}, ofed('cordon-required'), ofed('cordon-required')]), rollout)).toEqual([]);
    expect(limitViolations(before, pool(['cordon-required', 'upgrade-done', 'upgrade-done'], [{}, { unschedulable: true }, { unschedulable: true }]), rollout)).toHaveLength(1);
  });

  it('judges a start by this driver\'s own nodes: another driver\'s cordon landing with it is not counted (two coordinators, an informer\'s lag apart)', () => {
    const ofed = { unschedulable: true, labels: { pool: 'a', 'nvidia.com/ofed-driver-upgrade-state': 'cordon-required' } };
    const before = pool(['upgrade-required', 'upgrade-done', 'upgrade-done'], [{}, ofed, ofed]);
    expect(limitViolations(before, pool(['cordon-required', 'upgrade-done', 'upgrade-done'], [{}, ofed, ofed]), rollout)).toEqual([]);
    const three = pool(['cordon-required', 'cordon-required', 'cordon-required']);
    expect(limitViolations(pool(['cordon-required', 'cordon-required', 'upgrade-required']), three, rollout)).toHaveLength(1);
  });

  it('lets nodes already out of service start even above the limit', () => {
    const cordoned = { unschedulable: true };
    const before = pool(['upgrade-required', 'upgrade-required', 'upgrade-required'], [cordoned, cordoned, cordoned]);
    const after = pool(['cordon-required', 'cordon-required', 'cordon-required'], [cordoned, cordoned, cordoned]);
    expect(limitViolations(before, after, rollout)).toEqual([]);
  });
});

describe('cordons, pods and the end state', () => {
  it('knows an admin’s cordon from one another driver’s upgrade holds', () => {
    const nodes = [
      node('admin', 'upgrade-done', { unschedulable: true }),
      node('ofed', 'upgrade-done', { unschedulable: true, labels: { 'nvidia.com/ofed-driver-upgrade-state': 'drain-required' } }),
      node('marked', 'drain-required', { unschedulable: true, annotations: { 'nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable': 'true' } }),
      node('ours', 'drain-required', { unschedulable: true }),
    ];
    expect([...adminCordoned(nodes, rollout)].sort()).toEqual(['admin', 'marked']);
  });

  const pod = (extra: Partial<ObservedPod> = {}): ObservedPod => ({
    namespace: 'w', name: 'p', labels: {}, annotations: {}, owner: null, nodeName: 'n', resourceNames: [], nodeSelectorKeys: [], ...extra,
  });
  const daemonSet = (name: string) => ({ owner: { kind: 'DaemonSet', name } });
  const opts = { driverDaemonSets: ['driver'] };

  it('names pods the policy never removes', () => {
    const draining = readRollout({ driverName: 'gpu', upgradePolicy: { drain: { enable: true, podSelector: 'app=train' } } });
    expect(protectedPodRemoval(pod(daemonSet('driver')), rollout, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod(daemonSet('monitor')), rollout, opts)).toMatch(/DaemonSet pod w\/p removed/);
    expect(protectedPodRemoval(pod({ annotations: { 'kubernetes.io/config.mirror': 'x' } }), draining, opts)).toMatch(/mirror/);
    expect(protectedPodRemoval(pod({ labels: { app: 'train', 'nvidia.com/gpu-driver-upgrade-drain.skip': 'true' } }), draining, opts)).toMatch(/drain-skip/);
    expect(protectedPodRemoval(pod({ labels: { app: 'other' } }), draining, opts)).toMatch(/outside the drain selector/);
    expect(protectedPodRemoval(pod({ labels: { app: 'train' } }), draining, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod({ labels: { app: 'train' } }), rollout, opts)).toMatch(/not a device pod, and drain is off/);
  });

  it('reads the drain selector from the spec: "" drains every pod', () => {
    const all = readRollout({ driverName: 'gpu', upgradePolicy: { drain: { enable: true } } });
    expect(protectedPodRemoval(pod({ labels: { anything: 'x' } }), all, opts)).toBeUndefined();
  });

  it('lets pod deletion remove device pods (resource prefixes or podDeletion.podSelector), drain-skip or not, unless it is off', () => {
    const gpuPod = pod({ resourceNames: ['cpu', 'nvidia.com/gpu'], labels: { 'nvidia.com/gpu-driver-upgrade-drain.skip': 'true' } });
    expect(protectedPodRemoval(gpuPod, rollout, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod({ resourceNames: ['nvidia.com/mig-1g.10gb'] }), rollout, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod({ resourceNames: ['example.com/fpga'] }), rollout, opts)).toMatch(/not a device pod/);
    const rdma = readRollout({ driverName: 'ofed', upgradePolicy: { podDeletion: { enable: true, resourcePrefixes: ['rdma/'], podSelector: 'uses in (rdma, roce)' }, drain: { enable: false } } });
    expect(protectedPodRemoval(pod({ resourceNames: ['rdma/hca'] }), rdma, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod({ labels: { uses: 'roce' } }), rdma, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod({ resourceNames: ['nvidia.com/gpu'] }), rdma, opts)).toMatch(/not a device pod/);
    const ofedDeleting = readRollout({ driverName: 'ofed', upgradePolicy: { podDeletion: { enable: true }, drain: { enable: false } } });
    expect(protectedPodRemoval(pod({ resourceNames: ['rdma/rdma_shared_device_a'] }), ofedDeleting, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod({ resourceNames: ['nvidia.com/gpu'] }), ofedDeleting, opts)).toMatch(/not a device pod/);
    // A NIC driver's defaults are the Network Operator's: no pod deletion, the drain removes any pod.
    const ofed = readRollout({ driverName: 'ofed' });
    expect(protectedPodRemoval(pod({ resourceNames: ['nvidia.com/gpu'] }), ofed, opts)).toBeUndefined();
    expect(readRollout({ driverName: 'ofed' }).removal).toMatchObject({ podDeletion: { enable: false }, drain: { enable: true } });
    const other = readRollout({ driverName: 'tabc' });
    expect(protectedPodRemoval(pod({ resourceNames: ['nvidia.com/gpu'] }), other, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod({ resourceNames: ['openshift.io/sriov'] }), other, opts)).toBeUndefined();
    const off = readRollout({ driverName: 'gpu', upgradePolicy: { podDeletion: { enable: false } } });
    expect(protectedPodRemoval(gpuPod, off, opts)).toMatch(/drain-skip/);
  });

  it('lets the clients step delete DaemonSet pods that use the device or match clients.podSelector, and no other', () => {
    expect(protectedPodRemoval(pod({ ...daemonSet('cuda-monitor'), resourceNames: ['nvidia.com/gpu'] }), rollout, opts)).toBeUndefined();
    const selecting = readRollout({ driverName: 'gpu', upgradePolicy: { clients: { podSelector: 'app=nccl-test' } } });
    expect(protectedPodRemoval(pod({ ...daemonSet('nccl'), labels: { app: 'nccl-test' } }), selecting, opts)).toBeUndefined();
    expect(protectedPodRemoval(pod({ ...daemonSet('logs'), labels: { app: 'fluentd' } }), selecting, opts)).toMatch(/DaemonSet pod/);
  });

  it('lets an operand pod go only while its node label is paused (defaults for driver gpu; none for other drivers unless named)', () => {
    const plugin = pod({ ...daemonSet('device-plugin'), nodeSelectorKeys: ['nvidia.com/gpu.deploy.device-plugin'] });
    const paused = { ...opts, nodeLabels: { 'nvidia.com/gpu.deploy.device-plugin': 'paused-for-driver-upgrade' } };
    expect(protectedPodRemoval(plugin, rollout, paused)).toBeUndefined();
    expect(protectedPodRemoval(plugin, rollout, { ...opts, nodeLabels: { 'nvidia.com/gpu.deploy.device-plugin': 'true' } })).toMatch(/operand pod w\/p removed while its node's nvidia.com\/gpu.deploy.device-plugin is not paused/);
    expect(operandLabelsOf(plugin, rollout)).toEqual(['nvidia.com/gpu.deploy.device-plugin']);
    const ofed = readRollout({ driverName: 'ofed' });
    expect(protectedPodRemoval(plugin, ofed, paused)).toMatch(/DaemonSet pod/);
    const named = readRollout({ driverName: 'ofed', upgradePolicy: { clients: { operandLabels: ['example.com/rdma-plugin'] } } });
    const rdmaPlugin = pod({ ...daemonSet('rdma'), nodeSelectorKeys: ['example.com/rdma-plugin'] });
    expect(protectedPodRemoval(rdmaPlugin, named, { ...opts, nodeLabels: { 'example.com/rdma-plugin': 'paused-for-driver-upgrade' } })).toBeUndefined();
  });

  it.each([
    ['', { matchExpressions: [] }],
    ['a=b', { matchExpressions: [{ key: 'a', operator: 'In', values: ['b'] }] }],
    ['a==b,c!=d', { matchExpressions: [{ key: 'a', operator: 'In', values: ['b'] }, { key: 'c', operator: 'NotIn', values: ['d'] }] }],
    ['e in (x, y),f notin (z)', { matchExpressions: [{ key: 'e', operator: 'In', values: ['x', 'y'] }, { key: 'f', operator: 'NotIn', values: ['z'] }] }],
    ['g,!h', { matchExpressions: [{ key: 'g', operator: 'Exists' }, { key: 'h', operator: 'DoesNotExist' }] }],
  ])('reads the string selector %j', (text, expected) => {
    expect(readSelectorString(text)).toEqual(expected);
  });

  it('accepts as an end a node waiting, with its reason, for a slot its pool’s failed or admin-cordoned nodes hold for good', () => {
    const reason = { 'nvidia.com/gpu-driver-upgrade.reason': 'waiting for a slot in pool a' };
    const a = { labels: { pool: 'a' } };
    const failedHolds = [
      node('f', 'upgrade-failed', { ...a, unschedulable: true, annotations: { 'nvidia.com/gpu-driver-upgrade.reason': 'drain timed out' } }),
      node('w', 'upgrade-required', { ...a, annotations: reason }),
    ];
    expect(blockedByLimit(failedHolds[1] as ObservedNode, failedHolds, rollout, new Set())).toBe(true);
    expect(settledViolations(failedHolds, rollout, new Set())).toEqual([]);
    // Pool a of 2 nodes: 34% allows 1.
    const adminHolds = [node('c', 'upgrade-done', { ...a, unschedulable: true }), node('w', 'upgrade-required', { ...a, annotations: reason })];
    expect(settledViolations(adminHolds, rollout, new Set(['c']))).toEqual([]);
    // The admin-cordoned node itself is not held back by the limit (it is out of service already): not an end while it waits.
    const cordonedWaits = [failedHolds[0] as ObservedNode, node('c', 'upgrade-required', { ...a, unschedulable: true, annotations: reason })];
    expect(blockedByLimit(cordonedWaits[1] as ObservedNode, cordonedWaits, rollout, new Set(['c']))).toBe(false);
    expect(settledViolations(cordonedWaits, rollout, new Set(['c']))).toEqual(['c: ended in upgrade-required: waiting for a slot in pool a']);
    // A slot free (34% of 5 = 2, one failed node), or no reason given: not an end.
    const free = [...failedHolds, node('e', 'upgrade-done', a), node('g', 'upgrade-done', a), node('h', 'upgrade-done', a)];
    expect(settledViolations(free, rollout, new Set())).toEqual(['w: ended in upgrade-required: waiting for a slot in pool a']);
    const silent = [failedHolds[0] as ObservedNode, node('w', 'upgrade-required', a)];
    expect(settledViolations(silent, rollout, new Set())).toEqual(['w: ended in upgrade-required (silently: no reason)']);
  });

  it('accepts as an end a node halted, with its reason, once maxFailedNodes nodes have failed, and only then', () => {
    const budget = readRollout({ driverName: 'gpu', maxFailedNodes: 1 });
    const why = 'nvidia.com/gpu-driver-upgrade.reason';
    const failed = node('f', 'upgrade-failed', { unschedulable: true, annotations: { [why]: 'driver pod not Ready after 11 restarts' } });
    const halted = node('h', 'upgrade-required', { annotations: { [why]: 'halted: failure budget reached' } });
    expect(haltedByBudget(halted, [failed, halted], budget)).toBe(true);
    expect(settledViolations([failed, halted], budget, new Set())).toEqual([]);
    // No budget in the spec, no failed node yet, or no reason: not an end.
    expect(haltedByBudget(halted, [failed, halted], readRollout({ driverName: 'gpu' }))).toBe(false);
    expect(haltedByBudget(halted, [node('f', 'upgrade-done'), halted], budget)).toBe(false);
    expect(haltedByBudget(node('h', 'upgrade-required'), [failed, node('h', 'upgrade-required')], budget)).toBe(false);
    expect(readRollout({ driverName: 'gpu', maxFailedNodes: 2 }).maxFailedNodes).toBe(2);
  });

  it('ends every node done or failed with a reason, none cordoned by the rollout at done', () => {
    const reason = 'nvidia.com/gpu-driver-upgrade.reason';
    expect(settledViolations([
      node('ok', 'upgrade-done'),
      node('failed', 'upgrade-failed', { annotations: { [reason]: 'drain timed out' } }),
      node('silent', 'upgrade-failed'),
      node('stuck', 'drain-required'),
      node('left', 'upgrade-done', { unschedulable: true }),
    ], rollout, new Set())).toEqual([
      'silent: upgrade-failed without a reason',
      'stuck: ended in drain-required (silently: no reason)',
      'left: upgrade-done but left cordoned',
    ]);
  });
});

describe('an outside uncordon mid-upgrade', () => {
  /** The violations over one node's changes, each `state` or `state cordoned`, from the first. */
  const judge = (...changes: string[]): string[] => {
    let watch: CordonWatch | undefined;
    let before: ObservedNode | undefined;
    const violations: string[] = [];
    for (const change of changes) {
      const [state = '', cordoned] = change.split(' ');
      const after = node('n', state, { unschedulable: cordoned === 'cordoned' });
      const step = cordonLostViolation(watch, before, after, rollout);
      if (step.violation !== null) violations.push(step.violation);
      watch = step.watch;
      before = after;
    }
    return violations;
  };

  it('is kept when the rollout cordons the node again, or sends it back, before it moves it on; one step on is the write under way', () => {
    expect(judge('cordon-required cordoned', 'drain-required cordoned', 'drain-required', 'drain-required cordoned', 'pod-restart-required cordoned')).toEqual([]);
    expect(judge('pod-deletion-required cordoned', 'pod-deletion-required', 'drain-required', 'cordon-required', 'wait-for-jobs-required cordoned', 'upgrade-done')).toEqual([]);
    expect(judge('pod-restart-required cordoned', 'pod-restart-required', 'upgrade-done')).toEqual([]);
    expect(judge('drain-required cordoned', 'drain-required', 'upgrade-failed')).toEqual([]);
  });

  it('is broken by a second step on with the node still schedulable', () => {
    expect(judge('pod-deletion-required cordoned', 'pod-deletion-required', 'drain-required', 'pod-restart-required')).toEqual([
      'n: gpu moved on from drain-required to pod-restart-required with the node uncordoned from outside and not cordoned again (2 steps since)',
    ]);
    expect(judge('drain-required cordoned', 'drain-required', 'pod-restart-required', 'upgrade-done')).toHaveLength(1);
  });

  it('does not judge a node never seen cordoned in those steps (a restart-only upgrade never cordons)', () => {
    expect(judge('upgrade-required', 'pod-restart-required', 'validation-required', 'upgrade-done')).toEqual([]);
  });
});

describe('PodDisruptionBudgets that never allow a disruption', () => {
  const pod = (labels: Record<string, string>, namespace = 'ml'): ObservedPod => ({ namespace, name: 'p', labels, annotations: {}, owner: null, nodeName: 'n', resourceNames: [], nodeSelectorKeys: [] });
  const never = { namespace: 'ml', name: 'never', selector: { matchLabels: { guard: 'all' } }, maxUnavailable: 0 };
  it('flags the removal of a pod such a budget covers, and of no other', () => {
    expect(neverDisruptedRemoval(pod({ guard: 'all' }), [never])).toBe('pod ml/p removed though PodDisruptionBudget never (maxUnavailable 0) never allows a disruption');
    expect(neverDisruptedRemoval(pod({ guard: 'all' }), [{ ...never, maxUnavailable: '0%' }])).toBeDefined();
    expect(neverDisruptedRemoval(pod({ guard: 'some' }), [never])).toBeUndefined();
    expect(neverDisruptedRemoval(pod({ guard: 'all' }, 'other'), [never])).toBeUndefined();
    expect(neverDisruptedRemoval(pod({ guard: 'all' }), [{ ...never, maxUnavailable: 1 }])).toBeUndefined();
  });
});
