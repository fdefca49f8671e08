import { findModulesInUse, describeModulesInUse, type ModuleInUse } from '../shared/kmod/find-module-users.ts';
import type { LoadedModule } from '../shared/kmod/loaded-module.ts';
import type { Logger } from '../shared/logger.ts';
import { abortReason } from '../shared/abortable-sleep.ts';
import type { Clock } from './clock.ts';
import { ModulesInUseError } from './errors.ts';

/** Reads one module as /sys/module shows it; undefined when it is not loaded. */
export type ReadModule = (name: string) => Promise<LoadedModule | undefined>;

/** How often the pre-flight re-reads /sys/module while modules are in use (the kernel has no watch for refcnt). */
export const PREFLIGHT_RECHECK_MS = 2_000;
/** How often it repeats the "in use" log line while the users stay the same. */
export const PREFLIGHT_LOG_INTERVAL_MS = 30_000;

/** The loaded modules among `names` that have users outside the kernel (refcnt > holders). */
export async function findModulesToReplaceInUse(readModule: ReadModule, names: readonly string[]): Promise<ModuleInUse[]> {
  const loaded: LoadedModule[] = [];
  for (const name of names) {
    const module = await readModule(name);
    if (module !== undefined) loaded.push(module);
  }
  return findModulesInUse(loaded);
}

export interface PreflightOptions {
  readonly readModule: ReadModule;
  readonly modules: readonly string[];
  readonly signal: AbortSignal;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly recheckMs?: number;
  readonly logIntervalMs?: number;
}

/**
 * Pre-flight: resolves once none of `modules` has users outside the kernel, so the new driver can
 * replace them. Modules that are not loaded pass (nothing to replace).
 *
 * Policy: while a module is in use it re-checks every 2 s and logs the users (at once, whenever
 * they change, and every 30 s), instead of failing at the first look. The Network Operator's
 * driver container fails and lets the kubelet restart it (CrashLoopBackOff, growing delays);
 * re-checking in place reacts within seconds once the last user goes and keeps one clear log.
 * When `signal` aborts (overall timeout or SIGTERM) while modules are still in use, it throws
 * ModulesInUseError naming every module, its refcnt and its holders.
 */
export async function waitUntilModulesUnused(options: PreflightOptions): Promise<void> {
  const { readModule, modules, signal, clock, logger } = options;
  const recheckMs = options.recheckMs ?? PREFLIGHT_RECHECK_MS;
  const logIntervalMs = options.logIntervalMs ?? PREFLIGHT_LOG_INTERVAL_MS;
  let lastDescription = '';
  let lastLoggedAt = Number.NEGATIVE_INFINITY;
  for (;;) {
    const inUse = await findModulesToReplaceInUse(readModule, modules);
    if (inUse.length === 0) {
      logger.info({ modules }, 'pre-flight passed: no module to be replaced has users outside the kernel');
      return;
    }
    const description = describeModulesInUse(inUse);
    if (description !== lastDescription || clock.now() - lastLoggedAt >= logIntervalMs) {
      logger.warn({ modules: inUse, recheckInMs: recheckMs }, `pre-flight: driver is in use: ${description}; waiting for the users to stop`);
      lastDescription = description;
      lastLoggedAt = clock.now();
    }
    try {
      await clock.sleep(recheckMs, signal);
    } catch {
      throw new ModulesInUseError(inUse, abortReason(signal));
    }
  }
}
