import { DriverRolloutError } from '../../shared/errors.ts';
import type { LoadedModule } from '../../shared/kmod/loaded-module.ts';
import type { Logger } from '../../shared/logger.ts';
import { findFailedModule } from './plan/find-failed-module.ts';
import { DriverRolledBackError, DriverVerificationError, KernelCommandError, ModuleLoadError } from './kernel-errors.ts';
import type { KernelPort, LoadStep, ModuleFile, ModuleTree } from './kernel-port.ts';
import type { LastGoodDriver } from './last-good-driver.ts';
import { readLoadedModules, unloadDriver } from './unload-driver.ts';
import { writeConfigFile } from './write-config-file.ts';

export interface LoadRequest {
  readonly driver: string;
  readonly tree: ModuleTree;
  readonly modules: readonly ModuleFile[];
  /** The modules to modprobe, in order. */
  readonly toLoad: readonly string[];
  /** modprobe's plan for `toLoad` (dependencies first). */
  readonly loadOrder: readonly LoadStep[];
}

/**
 * modprobes `toLoad` one by one and verifies /sys/module. When the kernel refuses one, reads
 * /sys/module for the module that actually failed, unloads the driver's modules that did load
 * (modprobe leaves a failed request's dependencies loaded) and throws ModuleLoadError.
 */
export async function loadDriverModules(kernel: KernelPort, request: LoadRequest, log: Logger): Promise<LoadedModule[]> {
  for (const module of request.toLoad) {
    try {
      await kernel.load(request.tree, module);
    } catch (error) {
      if (!(error instanceof KernelCommandError)) throw error;
      throw await describeLoadFailure(kernel, request, module, error, log);
    }
  }
  return verifyLoaded(kernel, request.modules, request.loadOrder);
}

async function describeLoadFailure(kernel: KernelPort, request: LoadRequest, requested: string, error: KernelCommandError, log: Logger): Promise<ModuleLoadError> {
  const names = request.modules.map((m) => m.name);
  const loaded = await readLoadedModules(kernel, request.loadOrder.map((s) => s.module));
  const failedModule = findFailedModule(request.loadOrder, (m) => loaded.has(m)) ?? requested;
  log.error({ requested, failedModule, err: error }, 'a driver module failed to load; unloading the ones that did');
  try {
    await unloadDriver(kernel, request.driver, names, log);
  } catch (cleanupError) {
    log.error({ err: cleanupError }, 'cannot unload the modules loaded before the failure');
  }
  const leftLoaded = [...(await readLoadedModules(kernel, names)).keys()];
  return new ModuleLoadError({ failedModule, requested, leftLoaded }, error);
}

/** Every module modprobe inserted from this build is in /sys/module with the built srcversion. */
export async function verifyLoaded(kernel: KernelPort, built: readonly ModuleFile[], loadOrder: readonly LoadStep[]): Promise<LoadedModule[]> {
  const problems: string[] = [];
  const modules: LoadedModule[] = [];
  for (const file of built) {
    if (!loadOrder.some((s) => s.module === file.name)) continue;
    const live = await kernel.readModule(file.name);
    if (live === undefined) {
      problems.push(`${file.name} is not in /sys/module after loading`);
      continue;
    }
    modules.push(live);
    if (file.srcversion !== undefined && live.srcversion !== file.srcversion) {
      problems.push(`${file.name} srcversion is ${live.srcversion ?? '(none)'}, built ${file.srcversion}`);
    }
  }
  if (problems.length > 0) throw new DriverVerificationError(`driver loaded but not verified: ${problems.join('; ')}`, { problems });
  return modules;
}

/**
 * After `failure` (the new driver did not load, the old one is already unloaded): installs the
 * last good driver's modules from the module cache with its own options, loads and verifies
 * them, and returns DriverRolledBackError. When that fails too, an error saying both.
 */
export async function rollBack(kernel: KernelPort, tree: ModuleTree, optionsFile: string, lastGood: LastGoodDriver, failure: Error, log: Logger): Promise<Error> {
  log.warn({ version: lastGood.version, modules: lastGood.loaded }, 'the new driver failed to load: rolling back to the last good one');
  try {
    await writeConfigFile(optionsFile, lastGood.optionsText);
    await kernel.installModules(tree, lastGood.driver, lastGood.modules);
    const loadOrder = await kernel.resolveLoadOrder(tree, lastGood.loaded);
    const modules = await loadDriverModules(kernel, { driver: lastGood.driver, tree, modules: lastGood.modules, toLoad: lastGood.loaded, loadOrder }, log);
    log.warn({ version: lastGood.version, modules: modules.map((m) => ({ name: m.name, srcversion: m.srcversion })) }, 'rolled back to the last good driver');
    return new DriverRolledBackError(failure, { version: lastGood.version, modules: modules.map((m) => m.name) });
  } catch (rollbackError) {
    log.error({ err: rollbackError }, 'rolling back to the last good driver failed');
    const why = rollbackError instanceof Error ? rollbackError.message : String(rollbackError);
    return new DriverRolloutError(`${failure.message}; rolling back to ${lastGood.version} failed too: ${why}`, { restoredVersion: lastGood.version }, { cause: failure });
  }
}
