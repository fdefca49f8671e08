import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LoadedModule } from '../../../../../shared/kmod/loaded-module.ts';
import { planUnload } from '../../../../../agent/kernel/plan/plan-unload.ts';

function aModule(name: string, refcnt: number, holders: string[] = []): LoadedModule {
  return { name, refcnt, holders, srcversion: undefined, version: undefined, parameters: {} };
}

describe('planUnload', () => {
  it.each<[string, LoadedModule[], ReturnType<typeof planUnload>]>([
    ['nothing loaded', [], { kind: 'unload', order: [] }],
    ['net holds core', [aModule('drsample_core', 1, ['drsample_net']), aModule('drsample_net', 0)], { kind: 'unload', order: ['drsample_net', 'drsample_core'] }],
    [
      "NVIDIA's stack: drm, modeset, uvm, peermem before nvidia",
      [
        aModule('nvidia', 3, ['nvidia_modeset', 'nvidia_peermem', 'nvidia_uvm']),
        aModule('nvidia_modeset', 1, ['nvidia_drm']),
        aModule('nvidia_drm', 0),
        aModule('nvidia_uvm', 0),
        aModule('nvidia_peermem', 0),
      ],
      { kind: 'unload', order: ['nvidia_drm', 'nvidia_peermem', 'nvidia_uvm', 'nvidia_modeset', 'nvidia'] },
    ],
    [
      'an open device file (refcnt above holders)',
      [aModule('drsample_core', 2, ['drsample_net']), aModule('drsample_net', 0)],
      { kind: 'in-use', inUse: [{ module: 'drsample_core', refcnt: 2, holders: ['drsample_net'], outsideUsers: 1 }] },
    ],
    [
      'a holder that is not being unloaded',
      [aModule('mlx5_core', 1, ['mlx5_ib'])],
      { kind: 'in-use', inUse: [{ module: 'mlx5_core', refcnt: 1, holders: ['mlx5_ib'], outsideUsers: 1 }] },
    ],
  ])('%s', (_name, loaded, expected) => {
    expect(planUnload(loaded)).toEqual(expected);
  });

  /** A random module graph as the kernel would show it: module i may use symbols of modules j < i. */
  const loadedGraph = fc
    .array(fc.array(fc.nat(), { maxLength: 4 }), { minLength: 1, maxLength: 12 })
    .chain((deps) => fc.tuple(fc.constant(deps), fc.array(fc.nat({ max: 2 }), { minLength: deps.length, maxLength: deps.length })))
    .map(([deps, users]) => {
      const names = deps.map((_, i) => `m${i}`);
      const dependsOn = deps.map((ds, i) => [...new Set(ds.filter((d) => d < i).map((d) => `m${d % Math.max(i, 1)}`))]);
      return names.map((name, i) => {
        const holders = names.filter((_, h) => dependsOn[h]?.includes(name)).sort();
        return aModule(name, holders.length + (users[i] ?? 0), holders);
      });
    });

  it('unloads every module after all its holders, or refuses exactly when some refcnt exceeds its holders', () => {
    fc.assert(
      fc.property(loadedGraph, (loaded) => {
        const plan = planUnload(loaded);
        const hasOutsideUsers = loaded.some((m) => m.refcnt > m.holders.length);
        if (plan.kind === 'in-use') {
          expect(hasOutsideUsers).toBe(true);
          return;
        }
        expect(hasOutsideUsers).toBe(false);
        expect([...plan.order].sort()).toEqual(loaded.map((m) => m.name).sort());
        for (const m of loaded) {
          for (const h of m.holders) expect(plan.order.indexOf(h)).toBeLessThan(plan.order.indexOf(m.name));
        }
      }),
    );
  });
});
