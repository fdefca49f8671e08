import type { LoadStep, ModuleFile } from '../kernel-port.ts';

/**
 * Dependencies (from modinfo) of the modules modprobe will insert that nothing provides: not in
 * modprobe's plan (depmod could not resolve them in the tree) and not staying loaded. Loading would
 * fail with "Unknown symbol" after the old driver is gone, so this is checked before unloading.
 */
export function findMissingDependencies(
  built: readonly ModuleFile[],
  loadOrder: readonly LoadStep[],
  staysLoaded: (module: string) => boolean,
): string[] {
  const planned = new Set(loadOrder.map((s) => s.module));
  const missing: string[] = [];
  for (const file of built) {
    if (!planned.has(file.name)) continue;
    for (const dependency of file.dependsOn) {
      if (!planned.has(dependency) && !staysLoaded(dependency)) missing.push(`${file.name} needs ${dependency}`);
    }
  }
  return missing;
}
