import { describe, expect, it } from 'vitest';
import { createBudget, sealBudget, type PoolBudget } from '../../../../coordinator/plan/pool-capacity.ts';
import { slotReleaseOf, takeReleasedSlot, type SlotRelease } from '../../../../coordinator/plan/slot-release.ts';
import { aPolicy } from './fixtures.ts';

const up = { unschedulable: false, ready: true } as const;
const cordoned = { unschedulable: true, ready: true } as const;

/** The default pool of `policy` with `total` nodes, `unavailable` of them out of service and `upgrading` upgrading. */
function aBudget(upgradePolicy: Parameters<typeof aPolicy>[0], counts: { total: number; unavailable: number; upgrading: number }): PoolBudget {
  const budget = createBudget(aPolicy(upgradePolicy).defaultPool);
  Object.assign(budget, counts);
  sealBudget(budget);
  return budget;
}

describe('slotReleaseOf', () => {
  it('a node uncordoned into upgrade-done frees an unavailable and a parallel slot', () => {
    expect(slotReleaseOf('a', { state: 'pod-restart-required', ...cordoned }, { state: 'upgrade-done', ...up })).toEqual({ node: 'a', unavailable: true, upgrading: true });
  });

  it('a node that stays out of service frees only its parallel slot: failed and cordoned, or NotReady', () => {
    expect(slotReleaseOf('f', { state: 'pod-restart-required', ...cordoned }, { state: 'upgrade-failed', ...cordoned })).toEqual({ node: 'f', unavailable: false, upgrading: true });
    const notReady = { unschedulable: false, ready: false };
    expect(slotReleaseOf('n', { state: 'validation-required', ...notReady }, { state: 'upgrade-done', ...notReady })).toEqual({ node: 'n', unavailable: false, upgrading: true });
  });

  it('a node that frees nothing is no release: a step within the upgrade, or a mark', () => {
    expect(slotReleaseOf('a', { state: 'cordon-required', ...cordoned }, { state: 'pod-restart-required', ...cordoned })).toBeNull();
    expect(slotReleaseOf('a', { state: 'upgrade-done', ...up }, { state: 'upgrade-required', ...up })).toBeNull();
  });
});

describe('takeReleasedSlot', () => {
  it('takes the release of the first freeing node by name that makes room, and counts it as stored', () => {
    const budget = aBudget({ maxUnavailable: 2, maxParallelUpgrades: 0 }, { total: 10, unavailable: 2, upgrading: 2 });
    const releases: SlotRelease[] = [
      { node: 'z', unavailable: true, upgrading: true },
      { node: 'y', unavailable: true, upgrading: true },
    ];
    expect(takeReleasedSlot(budget, releases, false)).toBe('y');
    expect(releases.map((r) => r.node)).toEqual(['z']);
    expect([budget.unavailable, budget.upgrading]).toEqual([2, 2]);
  });

  it('passes over a release that frees the wrong count, and changes nothing when none makes room', () => {
    const budget = aBudget({ maxUnavailable: 1, maxParallelUpgrades: 0 }, { total: 10, unavailable: 1, upgrading: 1 });
    const parallelOnly: SlotRelease[] = [{ node: 'f', unavailable: false, upgrading: true }];
    expect(takeReleasedSlot(budget, parallelOnly, false)).toBeNull();
    expect([parallelOnly.length, budget.unavailable, budget.upgrading]).toEqual([1, 1, 1]);
    // A node already out of service needs only a parallel slot: that release is enough for it.
    const byParallel = aBudget({ maxUnavailable: 1, maxParallelUpgrades: 1 }, { total: 10, unavailable: 1, upgrading: 1 });
    expect(takeReleasedSlot(byParallel, parallelOnly, true)).toBe('f');
    expect([byParallel.unavailable, byParallel.upgrading]).toEqual([1, 1]);
  });
});
