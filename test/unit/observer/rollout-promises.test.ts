import { describe, expect, it } from 'vitest';
import {
  adminCordoned,
  allowedUnavailable,
  limitViolations,
  poolOf,
  protectedPodRemoval,
  readRollout,
  selects,
  settledViolations,
  type ObservedNode,
} from '../../observer/rollout-promises.ts';

const KEY = 'nvidia.com/gpu-driver-upgrade-state';
const node = (name: string, state: string, extra: Partial<ObservedNode> = {}): ObservedNode => ({
  name,
  labels: { [KEY]: state, ...extra.labels },
  annotations: extra.annotations ?? {},
  unschedulable: extra.unschedulable ?? false,
  ready: extra.ready ?? true,
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
    expect(limitViolations(before, after, rollout)).toEqual(['pool a: 3 of 3 nodes out of service, maxUnavailable 34% allows 2']);
  });

  it('counts NotReady nodes as out of service, but does not blame the rollout for a node turning NotReady', () => {
    const before = pool(['upgrade-required', 'upgrade-required', 'upgrade-required'], [{ ready: false }, { ready: false }]);
    const started = pool(['upgrade-required', 'upgrade-required', 'cordon-required'], [{ ready: false }, { ready: false }]);
    expect(limitViolations(before, started, rollout)).toHaveLength(1);
    const worldOnly = pool(['upgrade-done', 'upgrade-done', 'upgrade-done'], [{ ready: false }, { ready: false }, { ready: false }]);
    expect(limitViolations(pool(['upgrade-done', 'upgrade-done', 'upgrade-done']), worldOnly, rollout)).toEqual([]);
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

  it('names pods the policy never removes', () => {
    const base = { namespace: 'w', name: 'p', labels: {}, annotations: {}, owner: null, nodeName: 'n' };
    const opts = { driverDaemonSets: ['driver'] };
    expect(protectedPodRemoval({ ...base, owner: { kind: 'DaemonSet', name: 'driver' } }, rollout, opts)).toBeUndefined();
    expect(protectedPodRemoval({ ...base, owner: { kind: 'DaemonSet', name: 'monitor' } }, rollout, opts)).toMatch(/DaemonSet pod/);
    expect(protectedPodRemoval({ ...base, annotations: { 'kubernetes.io/config.mirror': 'x' } }, rollout, opts)).toMatch(/mirror/);
    expect(protectedPodRemoval({ ...base, labels: { 'nvidia.com/gpu-driver-upgrade-drain.skip': 'true' } }, rollout, opts)).toMatch(/drain-skip/);
    expect(protectedPodRemoval(base, rollout, { ...opts, drainSelector: { matchLabels: { app: 'train' } } })).toMatch(/outside the drain selector/);
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
