import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { readTextIfExists } from '../../shared/fs/if-exists.ts';
import { ConfigError, DriverRolloutError } from '../../shared/errors.ts';
import type { LoadedModule } from '../../shared/kmod/read-loaded-module.ts';
import { sysfsModuleName } from '../../shared/kmod/read-loaded-module.ts';
import type { Logger } from '../../shared/logger.ts';
import { decideReload, type ReloadDecision } from './decide-reload.ts';
import { findMissingDependencies } from './find-missing-dependencies.ts';
import { findUndeclaredParameters } from './find-undeclared-parameters.ts';
import { DriverVerificationError, ModuleDependencyError } from './kernel-errors.ts';
import type { KernelPort, LoadStep, ModuleFile, ModuleTree } from './kernel-port.ts';
import { parseModprobeConfig, renderBlacklist, renderModprobeOptions, type ModuleParameters } from './modprobe-config.ts';
import { planUnloadOrRefuse, readLoadedModules, unloadDriver, type DeviceUserLookup } from './unload-driver.ts';
import { writeConfigFile } from './write-config-file.ts';

/** The driver to load; `BuiltDriver` from agent/build fits. */
export interface DriverToLoad {
  readonly driver: string;
  readonly version: string;
  readonly kernelVersion: string;
  readonly modules: readonly ModuleFile[];
}

export interface ReloadDriverOptions {
  readonly tree: ModuleTree;
  /** Module parameters, written to `<configDir>/driver-rollout-<driver>.conf` as `options` lines. */
  readonly parameters?: ModuleParameters;
  /** Modules to modprobe (their dependencies come along). Default: every built module. */
  readonly loadModules?: readonly string[];
  /**
   * Inbox modules that would grab the device (e.g. nouveau): blacklisted in
   * `<configDir>/driver-rollout-<driver>-blacklist.conf` during the reload, and unloaded first
   * when loaded (subject to the same in-use refusal).
   */
  readonly competingModules?: readonly string[];
  /** Other modules of the old driver to unload when loaded (e.g. ones the new version dropped). */
  readonly alsoUnload?: readonly string[];
  /** Device files whose holders are named in DriverInUseError (e.g. `/dev/nvidia`). */
  readonly deviceUsers?: DeviceUserLookup;
  readonly logger: Logger;
}

export interface ReloadResult {
  /** fast-path: nothing done; reloaded: old modules unloaded and new ones loaded; loaded-fresh: nothing was loaded before. */
  readonly outcome: 'fast-path' | 'reloaded' | 'loaded-fresh';
  /** Why a load was needed (or why not, on the fast path). */
  readonly reason: string;
  /** Unloaded modules, in unload order. */
  readonly unloaded: readonly string[];
  /** modprobe's insmod sequence (empty on the fast path). */
  readonly loadOrder: readonly LoadStep[];
  /** The driver's modules as /sys/module shows them after the reload. */
  readonly modules: readonly LoadedModule[];
  readonly durationsMs: { readonly install: number; readonly unload: number; readonly load: number; readonly total: number };
}

/**
 * Makes the kernel run `built`: skips when it already does (srcversion fast path), else refuses
 * when the driver is in use (DriverInUseError, nothing changed), installs the modules and checks
 * modprobe can resolve them (before anything is unloaded), unloads the old modules holders
 * first, loads the new ones with modprobe and verifies /sys/module. Never forces an unload.
 */
export async function reloadDriver(kernel: KernelPort, built: DriverToLoad, options: ReloadDriverOptions): Promise<ReloadResult> {
  const started = performance.now();
  const log = options.logger.child({ driver: built.driver, version: built.version, kernelVersion: built.kernelVersion });
  if (built.kernelVersion !== options.tree.kernelVersion) {
    throw new DriverRolloutError(`modules built for ${built.kernelVersion} cannot be loaded from a tree for ${options.tree.kernelVersion}`, {
      built: built.kernelVersion,
      tree: options.tree.kernelVersion,
    });
  }
  const toLoad = modulesToLoad(built, options.loadModules);
  const parameters = options.parameters ?? {};
  // Before the fast path too: the kernel ignores an undeclared parameter, so only this sees a typo.
  const undeclared = findUndeclaredParameters(built.modules, parameters);
  if (undeclared.length > 0) throw new ConfigError('module parameters', undeclared);
  const competing = (options.competingModules ?? []).map(sysfsModuleName);
  const unloadSet = [...new Set([...built.modules.map((m) => m.name), ...(options.alsoUnload ?? []).map(sysfsModuleName), ...competing])];

  const optionsFile = join(options.tree.configDir, `driver-rollout-${built.driver}.conf`);
  const optionsText = renderModprobeOptions(parameters);
  const before = await readLoadedModules(kernel, unloadSet);
  const decision = withOptionsChange(decideReload(built.modules, toLoad, before, parameters), await readTextIfExists(optionsFile), optionsText);
  if (decision.kind === 'fast-path') {
    const modules = built.modules.map((m) => before.get(m.name)).filter((m) => m !== undefined);
    log.info({ modules: modules.map((m) => ({ name: m.name, srcversion: m.srcversion })) }, 'driver already loaded with the built srcversions; skipping the reload');
    const total = Math.round(performance.now() - started);
    return { outcome: 'fast-path', reason: 'loaded srcversions equal the built ones', unloaded: [], loadOrder: [], modules, durationsMs: { install: 0, unload: 0, load: 0, total } };
  }
  log.info({ reason: decision.reason }, 'driver needs loading');
  await planUnloadOrRefuse(built.driver, [...before.values()], options.deviceUsers);

  const blacklistFile = join(options.tree.configDir, `driver-rollout-${built.driver}-blacklist.conf`);
  await writeConfigFile(optionsFile, optionsText);
  const installStarted = performance.now();
  await kernel.installModules(options.tree, built.driver, built.modules);
  const loadOrder = await kernel.resolveLoadOrder(options.tree, toLoad);
  await refuseMissingDependencies(kernel, built.modules, loadOrder, unloadSet);
  const install = Math.round(performance.now() - installStarted);
  log.info({ loadOrder: loadOrder.map((s) => s.module), durationMs: install }, 'modules installed and depmod done');

  if (competing.length > 0) await writeConfigFile(blacklistFile, renderBlacklist(competing));
  try {
    const unloadStarted = performance.now();
    // unloadDriver reads /sys/module again: users may have come or gone while installing.
    const unloaded = await unloadDriver(kernel, built.driver, unloadSet, log, options.deviceUsers);
    const unload = Math.round(performance.now() - unloadStarted);

    const loadStarted = performance.now();
    for (const module of toLoad) await kernel.load(options.tree, module);
    const modules = await verifyLoaded(kernel, built.modules, loadOrder);
    const load = Math.round(performance.now() - loadStarted);
    const outcome = unloaded.length > 0 ? 'reloaded' : 'loaded-fresh';
    const total = Math.round(performance.now() - started);
    log.info({ outcome, unloaded, durationsMs: { install, unload, load, total } }, 'driver loaded and verified');
    return { outcome, reason: decision.reason, unloaded, loadOrder, modules, durationsMs: { install, unload, load, total } };
  } finally {
    if (competing.length > 0) await rm(blacklistFile, { force: true });
  }
}

async function refuseMissingDependencies(kernel: KernelPort, built: readonly ModuleFile[], loadOrder: readonly LoadStep[], unloadSet: readonly string[]): Promise<void> {
  const outsideDependencies = new Set(built.flatMap((m) => m.dependsOn).filter((d) => !unloadSet.includes(d)));
  const loadedOutside = new Set<string>();
  for (const name of outsideDependencies) if ((await kernel.readModule(name)) !== undefined) loadedOutside.add(name);
  const missing = findMissingDependencies(built, loadOrder, (m) => loadedOutside.has(m));
  if (missing.length > 0) {
    throw new ModuleDependencyError(`modprobe cannot resolve the driver's dependencies in the module tree (${missing.join('; ')}); nothing was unloaded`, { missing });
  }
}

/**
 * /sys/module shows a parameter's current value, not whether config still asks for it: a
 * parameter removed from config keeps its old value in the loaded module until a reload (seen on
 * Debian 6.1 under QEMU, test/kernel). The options file written at the last load records what
 * was asked; when it is gone (a reboot empties /run), /sys/module is all there is.
 */
function withOptionsChange(decision: ReloadDecision, previous: string | undefined, next: string): ReloadDecision {
  if (decision.kind !== 'fast-path' || previous === undefined || optionsOf(previous) === optionsOf(next)) return decision;
  return { kind: 'load', reason: 'module options changed since the last load' };
}

/** The `options` lines' meaning, so a change of comments or order alone is no reason to reload. */
function optionsOf(text: string): string {
  const { options } = parseModprobeConfig([text]);
  return JSON.stringify([...options].map(([module, values]) => [module, Object.entries(values).sort()]).sort());
}

function modulesToLoad(built: DriverToLoad, requested: readonly string[] | undefined): string[] {
  const names = built.modules.map((m) => m.name);
  const toLoad = (requested ?? names).map(sysfsModuleName);
  const unknown = toLoad.filter((m) => !names.includes(m));
  if (unknown.length > 0) throw new DriverRolloutError(`modules to load are not part of the build: ${unknown.join(', ')}`, { unknown, built: names });
  return toLoad;
}

/** Every module modprobe inserted from this build is in /sys/module with the built srcversion. */
async function verifyLoaded(kernel: KernelPort, built: readonly ModuleFile[], loadOrder: readonly LoadStep[]): Promise<LoadedModule[]> {
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
