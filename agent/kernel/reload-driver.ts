import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { readTextIfExists } from '../../shared/fs/if-exists.ts';
import { ConfigError, DriverRolloutError } from '../../shared/errors.ts';
import type { LoadedModule } from '../../shared/kmod/loaded-module.ts';
import { sysfsModuleName } from '../../shared/kmod/loaded-module.ts';
import type { Logger } from '../../shared/logger.ts';
import { decideReload, type ReloadDecision } from './plan/decide-reload.ts';
import { findMissingDependencies } from './plan/find-missing-dependencies.ts';
import { findUndeclaredParameters } from './plan/find-undeclared-parameters.ts';
import { checkDeclaredFirmware, installDriverFirmware, type FirmwareOptions } from './driver-firmware.ts';
import { DriverRolledBackError, HeldByUserModulesError, ModuleDependencyError, ModuleLoadError, ModuleSignatureUntrustedError, NeverUnloadError } from './kernel-errors.ts';
import { findUntrustedModules, trustedKeyNames, type ModuleSignature, type SignaturePolicy } from './plan/module-signature-trust.ts';
import { readSignaturesFor } from './read-signature-policy.ts';
import type { KernelPort, LoadStep, ModuleFile, ModuleTree } from './kernel-port.ts';
import { isRestorableAfter, LastGoodRecordError, readLastGoodDriver, writeLastGoodDriver, type LastGoodDriver } from './last-good-driver.ts';
import { loadDriverModules, rollBack, type LoadRequest } from './load-driver-modules.ts';
import { LOAD_PLANS, resolveLoadPlan, type LoadPlan } from './plan/load-plan.ts';
import { parseModprobeConfig, renderBlacklist, renderModprobeOptions, type ModuleParameters } from './plan/modprobe-config.ts';
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
  /**
   * The driver's own module tree (a container root or a driver-owned directory): the modules are
   * installed and depmod'ed there, never in the host's /lib/modules, so after a reboot nothing of
   * the driver's autoloads before the driver pod (and its safe-load gate) runs.
   */
  readonly tree: ModuleTree;
  /**
   * The host's module tree (read-only; default root `/`): inbox modules the driver needs (drm,
   * video, crc8 ...) and the plan's preloads are modprobe'd from it before anything is unloaded.
   */
  readonly hostTree?: ModuleTree;
  /** The driver kind's load plan (preloads, optional modules, extra holders); default LOAD_PLANS.generic. */
  readonly loadPlan?: LoadPlan;
  /** Optional modules of the plan to load anyway (e.g. nvidia_drm). */
  readonly enableOptional?: readonly string[];
  /** Unload the plan's user holders (MOFED's storage modules) instead of refusing. */
  readonly unloadUserHolders?: boolean;
  /**
   * Modules never to unload (KMM's "no unload" policy): when a reload would unload one of them
   * (loaded, and not on the fast path), NeverUnloadError before anything is changed; a reboot loads the new driver.
   */
  readonly neverUnload?: readonly string[];
  /**
   * The running kernel's module signature policy (readSignaturePolicy): when it enforces
   * signatures, modules it would refuse (unsigned, or signed by a key none of its keyrings holds)
   * are refused with ModuleSignatureUntrustedError before anything is changed. None: no check.
   */
  readonly signaturePolicy?: SignaturePolicy;
  /** Reads a module's signature; default `modinfo` (readModuleSignature). */
  readonly readSignature?: (file: ModuleFile) => Promise<ModuleSignature>;
  /** Declared firmware is checked before any unload, and the driver's firmware installed; none: no check. */
  readonly firmware?: FirmwareOptions;
  /**
   * Where the last verified driver is recorded (on a host path that outlives the pod). When a new
   * driver fails to load after the old one was unloaded, that one is loaded again. None: no rollback.
   */
  readonly lastGoodFile?: string;
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
  /**
   * What holds the driver outside the kernel (host daemons, SR-IOV VFs, vfio bindings): taken down
   * right before the unload and put back after the new driver loaded (agent/teardown). When it
   * stops holders (daemons keep the device files open), the early "in use" refusal is left to the
   * unload itself, which runs after they stopped; whatever refuses, what was taken down is put back.
   */
  readonly unloadGuard?: { readonly stopsHolders: boolean; takeDown(): Promise<void>; restore(): Promise<boolean> };
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
  /** The driver's modules modprobe was asked for, after the load plan (optional ones left out unless wanted). */
  readonly requested: readonly string[];
  /** Inbox modules loaded from the host's tree (preloads and dependencies), in order. */
  readonly preloaded: readonly string[];
  /** The custom firmware path before the agent set it (restore it on stop), when it set one. */
  readonly firmwarePathBefore?: string;
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
  const hostTree = options.hostTree ?? { root: '/', kernelVersion: options.tree.kernelVersion, configDir: options.tree.configDir };
  if (hostTree.root.replace(/\/+$/, '') === options.tree.root.replace(/\/+$/, '')) {
    throw new DriverRolloutError(`the driver's module root ${options.tree.root} is the host's module tree: install into a root the driver owns`, { root: options.tree.root });
  }
  const plan = options.loadPlan ?? LOAD_PLANS.generic;
  const requested = modulesToLoad(built, options.loadModules);
  const parameters = options.parameters ?? {};
  // Before the fast path too: the kernel ignores an undeclared parameter, so only this sees a typo.
  const undeclared = findUndeclaredParameters(built.modules, parameters);
  if (undeclared.length > 0) throw new ConfigError('module parameters', undeclared);
  const competing = (options.competingModules ?? []).map(sysfsModuleName);
  const planned = await resolvePlan(kernel, plan, requested, options);
  const toLoad = planned.load;
  const unloadSet = [...new Set([...built.modules.map((m) => m.name), ...(options.alsoUnload ?? []).map(sysfsModuleName), ...planned.alsoUnload, ...competing])];

  const optionsFile = join(options.tree.configDir, `driver-rollout-${built.driver}.conf`);
  const blacklistFile = join(options.tree.configDir, `driver-rollout-${built.driver}-blacklist.conf`);
  // Only a reload writes it, and removes it when done: one still there was left by an agent
  // killed mid-reload, and must not outlive it (the fast path below never writes it).
  await rm(blacklistFile, { force: true });
  const optionsText = renderModprobeOptions(parameters);
  const before = await readLoadedModules(kernel, unloadSet);
  const decision = withOptionsChange(decideReload(built.modules, toLoad, before, parameters), await readTextIfExists(optionsFile), optionsText);
  if (decision.kind === 'fast-path') {
    const modules = built.modules.map((m) => before.get(m.name)).filter((m) => m !== undefined);
    log.info({ modules: modules.map((m) => ({ name: m.name, srcversion: m.srcversion })) }, 'driver already loaded with the built srcversions; skipping the reload');
    await recordLastGood(options.lastGoodFile, built, toLoad, optionsText);
    const total = Math.round(performance.now() - started);
    return { outcome: 'fast-path', reason: 'loaded srcversions equal the built ones', unloaded: [], loadOrder: [], modules, requested: toLoad, preloaded: [], durationsMs: { install: 0, unload: 0, load: 0, total } };
  }
  log.info({ reason: decision.reason, skipped: planned.skipped }, 'driver needs loading');
  await refuseUntrustedSignatures(built, options);
  refuseNeverUnload(built, options.neverUnload, before);
  const holdingUsers = planned.refusingHolders.filter((h) => [...before.values()].some((m) => m.holders.includes(h)));
  if (holdingUsers.length > 0) throw new HeldByUserModulesError(built.driver, holdingUsers);
  const guard = await refuseInUseOrGuard(built.driver, before, options);

  const previousOptions = await readTextIfExists(optionsFile);
  await writeConfigFile(optionsFile, optionsText);
  const installStarted = performance.now();
  await kernel.installModules(options.tree, built.driver, built.modules);
  const loadOrder = await kernel.resolveLoadOrder(options.tree, toLoad);
  const preloaded = await preloadFromHost(kernel, hostTree, built.modules, loadOrder, plan.preload, log);
  await refuseMissingDependencies(kernel, built.modules, loadOrder, unloadSet);
  const firmware = await prepareFirmware(built, loadOrder, options.firmware);
  const lastGood = await readRestorable(options.lastGoodFile, log);
  const install = Math.round(performance.now() - installStarted);
  log.info({ loadOrder: loadOrder.map((s) => s.module), preloaded, durationMs: install }, 'modules installed and depmod done in the driver\'s tree');

  if (competing.length > 0) await writeConfigFile(blacklistFile, renderBlacklist(competing));
  try {
    const unloadStarted = performance.now();
    // unloadDriver reads /sys/module again: users may have come or gone while installing.
    const unloaded = await unloadGuarded(guard, () => unloadDriver(kernel, built.driver, unloadSet, log, options.deviceUsers), log);
    const unload = Math.round(performance.now() - unloadStarted);

    const loadStarted = performance.now();
    const restorable = lastGood !== undefined && isRestorableAfter(lastGood, built.kernelVersion, before, built.modules) ? lastGood : undefined;
    const modules = await loadThenRestore(
      options.unloadGuard,
      () => loadOrRollBack(kernel, { driver: built.driver, tree: options.tree, modules: built.modules, toLoad, loadOrder }, restorable, { optionsFile, previousOptions }, log),
    );
    const load = Math.round(performance.now() - loadStarted);
    await recordLastGood(options.lastGoodFile, built, toLoad, optionsText);
    const outcome = unloaded.length > 0 ? 'reloaded' : 'loaded-fresh';
    const total = Math.round(performance.now() - started);
    log.info({ outcome, unloaded, durationsMs: { install, unload, load, total } }, 'driver loaded and verified');
    return {
      outcome,
      reason: decision.reason,
      unloaded,
      loadOrder,
      modules,
      requested: toLoad,
      preloaded,
      ...(firmware === undefined ? {} : { firmwarePathBefore: firmware.previousPath }),
      durationsMs: { install, unload, load, total },
    };
  } finally {
    if (competing.length > 0) await rm(blacklistFile, { force: true });
  }
}

/**
 * The unload guard when something loaded will be unloaded. Refuses a driver in use now (before
 * anything is installed), unless the guard stops holders first: they hold the device files, so
 * then the unload itself checks, after they stopped.
 */
async function refuseInUseOrGuard(driver: string, before: ReadonlyMap<string, LoadedModule>, options: ReloadDriverOptions): Promise<ReloadDriverOptions['unloadGuard']> {
  const guard = before.size > 0 ? options.unloadGuard : undefined;
  if (guard?.stopsHolders !== true) await planUnloadOrRefuse(driver, [...before.values()], options.deviceUsers);
  return guard;
}

/** Takes down what holds the driver, then unloads; when the unload refuses, puts it back (the old driver still runs). */
async function unloadGuarded(guard: ReloadDriverOptions['unloadGuard'], unload: () => Promise<string[]>, log: Logger): Promise<string[]> {
  if (guard === undefined) return unload();
  await guard.takeDown();
  try {
    return await unload();
  } catch (error) {
    await guard.restore().catch((restoreError: unknown) => {
      log.error({ err: restoreError }, 'the unload was refused and what was taken down cannot be put back; the record stays for the next attempt');
    });
    throw error;
  }
}

/** Loads, then puts back what the guard took down; also after a rollback (the old driver runs again, and so should its devices and daemons). */
async function loadThenRestore(guard: ReloadDriverOptions['unloadGuard'], load: () => Promise<LoadedModule[]>): Promise<LoadedModule[]> {
  if (guard === undefined) return load();
  let modules: LoadedModule[];
  try {
    modules = await load();
  } catch (error) {
    if (error instanceof DriverRolledBackError) await guard.restore();
    throw error;
  }
  await guard.restore();
  return modules;
}

/**
 * Loads the new modules; when one fails, restores the options file and, when `lastGood` is what
 * ran before the unload, rolls back to it (DriverRolledBackError).
 */
async function loadOrRollBack(
  kernel: KernelPort,
  request: LoadRequest,
  lastGood: LastGoodDriver | undefined,
  files: { readonly optionsFile: string; readonly previousOptions: string | undefined },
  log: Logger,
): Promise<LoadedModule[]> {
  try {
    return await loadDriverModules(kernel, request, log);
  } catch (error) {
    if (!(error instanceof ModuleLoadError)) throw error;
    if (lastGood !== undefined) throw await rollBack(kernel, request.tree, files.optionsFile, lastGood, error, log);
    if (files.previousOptions === undefined) await rm(files.optionsFile, { force: true });
    else await writeConfigFile(files.optionsFile, files.previousOptions);
    throw error;
  }
}

/** Checks the declared firmware of the modules to load, then installs the driver's own (nothing without options). */
async function prepareFirmware(built: DriverToLoad, loadOrder: readonly LoadStep[], options: FirmwareOptions | undefined): Promise<{ readonly previousPath: string } | undefined> {
  if (options === undefined) return undefined;
  await checkDeclaredFirmware(built.modules.filter((m) => loadOrder.some((s) => s.module === m.name)), built.kernelVersion, options);
  return installDriverFirmware(options);
}

async function resolvePlan(kernel: KernelPort, plan: LoadPlan, requested: readonly string[], options: ReloadDriverOptions): Promise<ReturnType<typeof resolveLoadPlan>> {
  const watched = [...new Set([...plan.optional.flatMap((o) => (o.load === 'off' ? [] : [o.load.whenLoaded])), ...plan.userHolders])];
  const loaded = await readLoadedModules(kernel, watched);
  return resolveLoadPlan(plan, requested, (m) => loaded.has(m), {
    ...(options.enableOptional === undefined ? {} : { enabled: options.enableOptional }),
    ...(options.unloadUserHolders === undefined ? {} : { unloadUsers: options.unloadUserHolders }),
  });
}

/**
 * Loads, from the host's tree, the plan's preloads and the inbox modules the driver's modules
 * depend on (modinfo `depends` outside the build), before anything is unloaded. Refuses when the
 * host's tree cannot resolve one, or when resolving it would load a module the driver ships
 * itself (the inbox copy would then stand in the driver's way).
 */
async function preloadFromHost(
  kernel: KernelPort,
  hostTree: ModuleTree,
  built: readonly ModuleFile[],
  loadOrder: readonly LoadStep[],
  preload: readonly string[],
  log: Logger,
): Promise<string[]> {
  const ours = new Set(built.map((m) => m.name));
  const planned = new Set(loadOrder.map((s) => s.module));
  const inbox = [...new Set([...preload.map(sysfsModuleName), ...built.filter((m) => planned.has(m.name)).flatMap((m) => m.dependsOn).filter((d) => !ours.has(d))])];
  if (inbox.length === 0) return [];
  let hostOrder: LoadStep[];
  try {
    hostOrder = await kernel.resolveLoadOrder(hostTree, inbox);
  } catch (error) {
    throw new ModuleDependencyError(`the host's module tree cannot provide the driver's inbox dependencies (${inbox.join(', ')}); nothing was unloaded`, { inbox, hostRoot: hostTree.root }, { cause: error });
  }
  const clash = hostOrder.filter((s) => ours.has(s.module)).map((s) => s.module);
  if (clash.length > 0) {
    throw new ModuleDependencyError(`loading the inbox dependencies from the host's tree would load the host's own ${clash.join(', ')}, which the driver ships; nothing was unloaded`, { inbox, clash });
  }
  for (const module of inbox) await kernel.load(hostTree, module);
  log.info({ modules: hostOrder.map((s) => s.module), hostRoot: hostTree.root }, 'inbox modules loaded from the host tree');
  return hostOrder.map((s) => s.module);
}

/**
 * The last good record to roll back to, if the load fails. An unreadable one (LastGoodRecordError,
 * naming the file and field) leaves nothing to roll back to, and says so; the next verified load
 * writes a good one over it.
 */
async function readRestorable(path: string | undefined, log: Logger): Promise<LastGoodDriver | undefined> {
  if (path === undefined) return undefined;
  try {
    return await readLastGoodDriver(path);
  } catch (error) {
    if (!(error instanceof LastGoodRecordError)) throw error;
    log.warn({ err: error, ...error.fields }, 'the last good driver record is unreadable: no rollback if this load fails');
    return undefined;
  }
}

async function recordLastGood(path: string | undefined, built: DriverToLoad, loaded: readonly string[], optionsText: string): Promise<void> {
  if (path === undefined) return;
  await writeLastGoodDriver(path, { driver: built.driver, version: built.version, kernelVersion: built.kernelVersion, modules: built.modules, loaded, optionsText });
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

/** ModuleSignatureUntrustedError when the kernel enforces signatures and would refuse a module of the build. */
async function refuseUntrustedSignatures(built: DriverToLoad, options: ReloadDriverOptions): Promise<void> {
  const policy = options.signaturePolicy;
  if (policy?.enforced !== true) return;
  const signatures = await readSignaturesFor(policy, built.modules, options.readSignature);
  const untrusted = findUntrustedModules(policy, signatures);
  if (untrusted.length > 0) throw new ModuleSignatureUntrustedError(built.driver, policy.enforcedBy, untrusted, trustedKeyNames(policy));
}

/** NeverUnloadError when a module the reload would unload (loaded now) is on the never-unload list. */
function refuseNeverUnload(built: DriverToLoad, neverUnload: readonly string[] | undefined, loaded: ReadonlyMap<string, LoadedModule>): void {
  const pinned = (neverUnload ?? []).map(sysfsModuleName).filter((m) => loaded.has(m)).sort();
  if (pinned.length > 0) throw new NeverUnloadError(built.driver, pinned, built.version);
}
