import type { LoadedModule } from '../../shared/kmod/read-loaded-module.ts';
import type { ModuleParameters } from './modprobe-config.ts';
import type { ModuleFile } from './kernel-port.ts';

export type ReloadDecision =
  /** The built modules are what is loaded: nothing to do. */
  | { readonly kind: 'fast-path' }
  | { readonly kind: 'load'; readonly reason: string };

/**
 * Whether loading `built` would change anything. Skipped (fast path) only when every module to
 * load is loaded with the built srcversion, no other built module is loaded with another one,
 * and no configured parameter that /sys/module shows differs. A module without srcversion
 * (no MODULE_VERSION) cannot be compared, so it is always reloaded.
 */
export function decideReload(
  built: readonly ModuleFile[],
  toLoad: readonly string[],
  loaded: ReadonlyMap<string, LoadedModule>,
  parameters: ModuleParameters,
): ReloadDecision {
  const reasons: string[] = [];
  for (const file of built) {
    const live = loaded.get(file.name);
    if (live === undefined) {
      if (toLoad.includes(file.name)) reasons.push(`${file.name} is not loaded`);
      continue;
    }
    if (file.srcversion === undefined || live.srcversion === undefined) {
      reasons.push(`${file.name} has no srcversion to compare`);
    } else if (live.srcversion !== file.srcversion) {
      reasons.push(`${file.name} srcversion ${live.srcversion} is loaded, ${file.srcversion} is built`);
    }
    for (const [parameter, wanted] of Object.entries(parameters[file.name] ?? {})) {
      const current = live.parameters[parameter];
      if (current !== undefined && !isSameParameterValue(current, wanted)) {
        reasons.push(`${file.name} parameter ${parameter} is ${current}, configured ${wanted}`);
      }
    }
  }
  return reasons.length === 0 ? { kind: 'fast-path' } : { kind: 'load', reason: reasons.join('; ') };
}

const TRUE_WORDS = new Set(['1', 'y', 'Y', 'true', 'on']);
const FALSE_WORDS = new Set(['0', 'n', 'N', 'false', 'off']);

/** sysfs shows bool parameters as Y/N whatever was passed (1, y, true, on...). */
export function isSameParameterValue(sysfsValue: string, configured: string): boolean {
  if (sysfsValue === 'Y') return TRUE_WORDS.has(configured);
  if (sysfsValue === 'N') return FALSE_WORDS.has(configured);
  return sysfsValue === configured;
}
