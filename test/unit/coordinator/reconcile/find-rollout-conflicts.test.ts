import { describe, expect, it } from 'vitest';
import { findRolloutConflicts, type RolloutClaim } from '../../../../coordinator/reconcile/find-rollout-conflicts.ts';

const claim = (key: string, createdAt: string, driverName: string, daemonSets: string[] = [], domain = 'nvidia.com', acting = false): RolloutClaim => ({
  key,
  createdAt,
  acting,
  driverName,
  stateLabel: `${domain}/${driverName}-driver-upgrade-state`,
  daemonSets,
});

describe('findRolloutConflicts', () => {
  it('lets the older of two rollouts for one driver (in different namespaces) act, and names it to the newer', () => {
    const conflicts = findRolloutConflicts([claim('team-b/gpu', '2026-11-22T02:00:00Z', 'gpu', ['team-b/driver']), claim('team-a/gpu', '2026-11-22T01:00:00Z', 'gpu', ['team-a/driver'])]);
    expect([...conflicts.keys()]).toEqual(['team-b/gpu']);
    expect(conflicts.get('team-b/gpu')).toEqual([
      { path: 'spec.driverName', message: expect.stringContaining('already rolled out by DriverRollout team-a/gpu') as unknown },
    ]);
  });

  it('breaks a tie in creation time by namespace/name, the same on every replica', () => {
    const t = '2026-11-22T01:00:00Z';
    expect([...findRolloutConflicts([claim('b/x', t, 'gpu'), claim('a/x', t, 'gpu')]).keys()]).toEqual(['b/x']);
  });

  it('within one second of creation, keeps the rollout already acting, whatever the names', () => {
    const t = '2026-11-22T01:00:00Z';
    const conflicts = findRolloutConflicts([claim('a-2/x', t, 'gpu'), claim('a/x', t, 'gpu', [], 'nvidia.com', true)]);
    expect([...conflicts.keys()]).toEqual(['a-2/x']);
    expect(conflicts.get('a-2/x')?.[0]?.message).toContain('already rolled out by DriverRollout a/x');
  });

  it('flags two rollouts claiming one DaemonSet on spec.selector', () => {
    const conflicts = findRolloutConflicts([claim('ns/gpu', '1', 'gpu', ['ns/driver']), claim('ns/ofed', '2', 'ofed', ['ns/driver', 'ns/other'])]);
    expect(conflicts.get('ns/ofed')).toEqual([{ path: 'spec.selector', message: 'DaemonSet ns/driver is already managed by DriverRollout ns/gpu' }]);
  });

  it('allows one driver name under two key domains, and different drivers side by side', () => {
    expect(findRolloutConflicts([claim('a/x', '1', 'gpu'), claim('b/x', '2', 'gpu', [], 'example.com'), claim('c/x', '3', 'ofed')]).size).toBe(0);
  });

  it('judges a third rollout against the winner only (a loser claims nothing)', () => {
    const conflicts = findRolloutConflicts([claim('a/x', '1', 'gpu', ['a/ds']), claim('b/x', '2', 'gpu', ['b/ds']), claim('c/x', '3', 'ofed', ['b/ds'])]);
    expect([...conflicts.keys()]).toEqual(['b/x']);
  });
});
