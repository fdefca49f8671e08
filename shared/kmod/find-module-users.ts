import type { LoadedModule } from './loaded-module.ts';

/**
 * Why a loaded module cannot be unloaded safely: something outside the kernel's module graph
 * holds it (an open device file, a mount, a socket). The kernel only tells us counts, so a
 * "user" is reported as the refcnt not explained by holders that are themselves being unloaded.
 */
export interface ModuleInUse {
  readonly module: string;
  readonly refcnt: number;
  readonly holders: readonly string[];
  /** refcnt minus holders: references from userspace (or other kernel code). */
  readonly outsideUsers: number;
}

/**
 * The modules among `modules` with users outside the kernel module graph
 * (refcnt > number of holders). Holders outside `modules` are reported too, since they pin it.
 *
 * With `unloading` (the names of every module about to be unloaded), only holders in that set
 * explain references: a holder that stays loaded pins the module as surely as an open file, so
 * it counts as an outside user.
 */
export function findModulesInUse(modules: readonly LoadedModule[], unloading?: ReadonlySet<string>): ModuleInUse[] {
  const out: ModuleInUse[] = [];
  for (const m of modules) {
    const explained = unloading === undefined ? m.holders.length : m.holders.filter((h) => unloading.has(h)).length;
    const outsideUsers = m.refcnt - explained;
    if (outsideUsers > 0) {
      out.push({ module: m.name, refcnt: m.refcnt, holders: m.holders, outsideUsers });
    }
  }
  return out;
}

/** One line naming every module in use and why, for logs, conditions and exit messages. */
export function describeModulesInUse(inUse: readonly ModuleInUse[]): string {
  return inUse
    .map((u) => `${u.module} (refcnt ${u.refcnt}, holders [${u.holders.join(', ')}], ${u.outsideUsers} user(s) outside the kernel)`)
    .join('; ');
}
