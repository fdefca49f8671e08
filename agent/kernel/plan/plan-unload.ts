import { findModulesInUse, type ModuleInUse } from '../../../shared/kmod/find-module-users.ts';
import type { LoadedModule } from '../../../shared/kmod/loaded-module.ts';
import { DriverRolloutError } from '../../../shared/errors.ts';

export type UnloadPlan =
  /** Unload in this order: every module after all of its holders. */
  | { readonly kind: 'unload'; readonly order: readonly string[] }
  /** Refuse: some module has references not explained by holders that are being unloaded too. */
  | { readonly kind: 'in-use'; readonly inUse: readonly ModuleInUse[] };

/**
 * Decides how to unload `loaded` (the loaded modules of the set to unload, as /sys/module shows
 * them). A module may go only when its refcnt is fully explained by holders inside the set: the
 * kernel refuses (EBUSY) otherwise, and forcing would leave dangling references. The order is
 * holders first, ties by name so the plan is deterministic.
 */
export function planUnload(loaded: readonly LoadedModule[]): UnloadPlan {
  const names = new Set(loaded.map((m) => m.name));
  const inUse = findModulesInUse(loaded, names);
  if (inUse.length > 0) return { kind: 'in-use', inUse };

  const remainingHolders = new Map(loaded.map((m) => [m.name, new Set(m.holders.filter((h) => names.has(h)))]));
  const order: string[] = [];
  while (remainingHolders.size > 0) {
    const free = [...remainingHolders].filter(([, holders]) => holders.size === 0).map(([name]) => name).sort();
    if (free.length === 0) {
      throw new DriverRolloutError('module holders form a cycle; refusing to unload', { modules: [...remainingHolders.keys()] });
    }
    for (const name of free) {
      order.push(name);
      remainingHolders.delete(name);
      for (const holders of remainingHolders.values()) holders.delete(name);
    }
  }
  return { kind: 'unload', order };
}
