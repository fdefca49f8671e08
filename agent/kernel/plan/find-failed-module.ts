import type { LoadStep } from '../kernel-port.ts';

/**
 * Pure: the module modprobe stopped at. modprobe inserts `loadOrder` in order and stops at the
 * first refusal without unloading what it inserted, so the refused module is the first one of
 * the order that is not loaded now (modprobe's own message names the module it was asked for,
 * not the one that failed). Undefined when every module is loaded (the failure was elsewhere).
 */
export function findFailedModule(loadOrder: readonly LoadStep[], isLoaded: (module: string) => boolean): string | undefined {
  return loadOrder.find((step) => step.kind === 'insmod' && !isLoaded(step.module))?.module;
}
