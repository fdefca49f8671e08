import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { dirname, isAbsolute, join, normalize } from 'node:path';
import { performance } from 'node:perf_hooks';
import { x as extractTar } from 'tar';
import type { Logger } from '../../shared/logger.ts';
import { BuildOutputError, SourceFetchError } from './build-errors.ts';
import { defaultRecipe, type BuildRecipe } from './build-recipe.ts';
import type { BuiltDriver, BuiltModule } from './built-driver.ts';
import { computeBuildKey } from './compute-build-key.ts';
import { digestSourceTree, isKbuildOutput } from './digest-source-tree.ts';
import { expandBuildVariables, machineOf, type BuildPlaceholders } from './expand-build-variables.ts';
import { fetchTarball } from './fetch-tarball.ts';
import { defaultHeadersDirs } from './find-kernel-headers.ts';
import { findKernelTrees, type KernelTrees } from './find-kernel-trees.ts';
import { findPrebuiltModules } from './find-prebuilt-modules.ts';
import { lookUpCacheEntry, pruneModuleCache, removeCacheEntry, sha256OfFile, storeCacheEntry, touchCacheEntry, type CacheEntryModule } from './module-cache.ts';
import { readCompilerVersion } from './read-compiler-version.ts';
import { readModuleInfo } from './read-module-info.ts';
import { pathExists } from '../../shared/fs/if-exists.ts';
import { runDkms } from './run-dkms.ts';
import { parseModulesOrder, runKbuild } from './run-kbuild.ts';
import { runVendorMake } from './run-vendor-make.ts';
import { signModule, type ModuleSigningKey } from './sign-module.ts';

const DEFAULT_CACHE_ENTRIES_KEPT = 8;

/** Where the driver's kbuild sources come from. */
export type DriverSource =
  /** A directory in the image (Kbuild/Makefile at its top); copied before building, never written. */
  | { readonly kind: 'directory'; readonly path: string }
  /** A .tar(.gz|.xz) downloaded with retries and verified against `sha256` before it is unpacked. */
  | { readonly kind: 'tarball'; readonly url: string; readonly sha256: string; readonly stripComponents?: number };

export interface BuildDriverOptions {
  /** Short driver name (e.g. `nvidia`, `mofed`, `drsample`), used in logs and paths. */
  readonly driver: string;
  readonly version: string;
  /** Target kernel release, explicit (the node's `uname -r`); never inferred here. */
  readonly kernelVersion: string;
  readonly source: DriverSource;
  /** Host path of the module cache (survives pod restarts). */
  readonly cacheDir: string;
  /** Files written into the build copy before compiling, by relative path (e.g. a version.h). */
  readonly generatedFiles?: Readonly<Record<string, string>>;
  /** `NAME=value` arguments passed to make: the kbuild recipe's variables when `recipe` is not given. */
  readonly makeVariables?: Readonly<Record<string, string>>;
  /** How to build (kbuild, the vendor's make, dkms); default: kbuild with `makeVariables`. */
  readonly recipe?: BuildRecipe;
  /** Module.symvers of other drivers this one builds against, by name: their digests join the cache key. */
  readonly dependencySymvers?: Readonly<Record<string, string>>;
  /**
   * Modules shipped ready-built in the image, `<prebuiltDir>/<kernel release>/*.ko` (KMM's
   * layout): used after verification, without compiling, when the directory for the kernel exists.
   */
  readonly prebuiltDir?: string;
  /** Sign every module with `scripts/sign-file` of the headers (Secure Boot). */
  readonly signing?: ModuleSigningKey | undefined;
  /** kbuild trees to try, in order (default: /lib/modules/<kver>/build, /usr/src/linux-headers-<kver>). */
  readonly headersDirs?: readonly string[];
  /** Parent of the temporary build directory, dkms's private trees included (default: `<cacheDir>/.work`). */
  readonly workDir?: string;
  /** make -j (default: available CPUs). */
  readonly jobs?: number;
  /** Cache entries kept (most recently used, across kernels) after a build; default 8. */
  readonly cacheEntriesKept?: number;
  /**
   * Compile at the lowest CPU and I/O priority (`nice -n 19 ionice -c 3`): the next-kernel
   * preflight, which nothing waits for. The result and its cache key are the same.
   */
  readonly background?: boolean;
  readonly fetchAttempts?: number;
  readonly fetchBackoffMs?: number;
  readonly logger: Logger;
  readonly signal?: AbortSignal | undefined;
}

/**
 * Produces the driver's modules for one kernel: from the cache when an entry with the same key
 * verifies, else by compiling with kbuild in a temporary copy and storing the result. A cache hit
 * needs neither the headers nor the network. Throws KernelHeadersMissingError, CompileError,
 * SourceFetchError/SourceChecksumError, ModuleSigningError or BuildOutputError.
 */
export async function buildDriver(options: BuildDriverOptions): Promise<BuiltDriver> {
  const started = performance.now();
  const log = options.logger.child({ driver: options.driver, version: options.version, kernelVersion: options.kernelVersion });
  if (options.prebuiltDir !== undefined) {
    const prebuilt = await findPrebuiltModules(options.prebuiltDir, options.kernelVersion);
    if (prebuilt !== undefined) return usePrebuilt(options, prebuilt, started, log);
    log.info({ prebuiltDir: options.prebuiltDir }, 'no prebuilt modules for this kernel in the image; building');
  }
  const generatedFiles = options.generatedFiles ?? {};
  const recipe = options.recipe ?? defaultRecipe(options.makeVariables ?? {});
  const workParent = options.workDir ?? join(options.cacheDir, '.work');
  await mkdir(workParent, { recursive: true });
  const dependencySymvers: Record<string, string> = {};
  for (const [name, path] of Object.entries(options.dependencySymvers ?? {})) dependencySymvers[name] = await sha256OfFile(path);
  const cacheKey = computeBuildKey({
    kernelVersion: options.kernelVersion,
    sourceDigest: await digestSource(options.source, recipe),
    generatedFiles,
    recipe,
    compilerVersion: await readCompilerVersion(workParent),
    dependencySymvers,
    signingCertificateSha256: options.signing === undefined ? undefined : await sha256OfFile(options.signing.certificatePath),
  });
  const finish = (modules: BuiltDriver['modules'], cacheHit: boolean): BuiltDriver => {
    const built: BuiltDriver = {
      driver: options.driver,
      version: options.version,
      kernelVersion: options.kernelVersion,
      modules,
      cacheKey,
      cacheHit,
      signed: options.signing !== undefined,
      durationMs: Math.round(performance.now() - started),
    };
    log.info({ cacheKey, cacheHit, durationMs: built.durationMs, modules: modules.map((m) => ({ name: m.name, srcversion: m.srcversion })) }, cacheHit ? 'driver modules found in cache' : 'driver modules built');
    return built;
  };

  const cached = await lookUpCacheEntry(options.cacheDir, options.kernelVersion, cacheKey);
  if (cached.status === 'hit') {
    await touchCacheEntry(options.cacheDir, options.kernelVersion, cacheKey);
    return finish(await withDeclaredParameters(cached.modules), true);
  }
  if (cached.status === 'corrupt') {
    log.warn({ cacheKey, problem: cached.problem }, 'module cache entry is corrupt; rebuilding it');
    await removeCacheEntry(options.cacheDir, options.kernelVersion, cacheKey);
  }

  const trees = await findKernelTrees(options.kernelVersion, options.headersDirs ?? defaultHeadersDirs(options.kernelVersion));
  const work = await mkdtemp(join(workParent, `driver-rollout-build-${options.driver}-`));
  try {
    const sourceDir = join(work, 'src');
    await prepareSources(options, work, sourceDir, log);
    await writeGeneratedFiles(sourceDir, generatedFiles);
    log.info({ recipe: recipe.kind, kernelOutput: trees.output, kernelSource: trees.source, sourceDir }, `compiling driver modules (${recipe.kind} recipe)`);
    const files = await compile(recipe, { options, trees, sourceDir, work });
    const modules = await collectModules(files, options, trees.output);
    const stored = await storeCacheEntry(
      options.cacheDir,
      { driver: options.driver, version: options.version, kernelVersion: options.kernelVersion, cacheKey, signed: options.signing !== undefined, builtAt: new Date().toISOString() },
      modules,
    );
    const pruned = await pruneModuleCache(options.cacheDir, options.driver, Math.max(1, options.cacheEntriesKept ?? DEFAULT_CACHE_ENTRIES_KEPT));
    if (pruned.length > 0) log.info({ pruned }, 'removed least recently used module cache entries');
    return finish(stored, false);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

interface CompileContext {
  readonly options: BuildDriverOptions;
  readonly trees: KernelTrees;
  readonly sourceDir: string;
  readonly work: string;
}

/** Runs the recipe in the build copy; returns the built .ko files in load-relevant order. */
async function compile(recipe: BuildRecipe, { options, trees, sourceDir, work }: CompileContext): Promise<string[]> {
  const jobs = options.jobs ?? availableParallelism();
  const arch = machineOf(process.arch);
  const placeholders: BuildPlaceholders = { kernel: options.kernelVersion, kernelSource: trees.source, kernelOutput: trees.output, arch, jobs: String(jobs) };
  const common = { kernelVersion: options.kernelVersion, jobs, background: options.background, signal: options.signal };
  switch (recipe.kind) {
    case 'kbuild': {
      const makeVariables = expandBuildVariables(recipe.variables, placeholders, 'build-recipe.variables');
      await runKbuild({ ...common, headersDir: trees.output, sourceDir, makeVariables, home: work });
      return modulesFromOrder(sourceDir);
    }
    case 'make':
      return runVendorMake({ ...common, recipe, sourceDir, placeholders, home: work });
    case 'dkms':
      return [...(await runDkms({ ...common, sourceDir, packages: recipe.packages, work, kernelTrees: trees, arch })).files];
  }
}

/** Modules prebuilt in the image: verified by findPrebuiltModules, signed copies are not made (sign them in the image). */
async function usePrebuilt(options: BuildDriverOptions, prebuilt: readonly CacheEntryModule[], started: number, log: Logger): Promise<BuiltDriver> {
  const modules: BuiltModule[] = [];
  for (const m of prebuilt) {
    modules.push({ name: m.name, path: m.builtPath, sha256: await sha256OfFile(m.builtPath), srcversion: m.srcversion, version: m.version, dependsOn: m.dependsOn, parameters: m.parameters });
  }
  const built: BuiltDriver = {
    driver: options.driver,
    version: options.version,
    kernelVersion: options.kernelVersion,
    modules,
    cacheKey: `prebuilt:${modules.map((m) => m.sha256).join(',')}`,
    cacheHit: true,
    prebuilt: true,
    signed: false,
    durationMs: Math.round(performance.now() - started),
  };
  log.info({ prebuiltDir: options.prebuiltDir, modules: modules.map((m) => ({ name: m.name, srcversion: m.srcversion })) }, 'using the prebuilt driver modules the image carries (verified vermagic and srcversion)');
  return built;
}

/** Entries stored before declared parameters were recorded get them from modinfo (no rebuild). */
async function withDeclaredParameters(modules: readonly BuiltModule[]): Promise<BuiltModule[]> {
  const out: BuiltModule[] = [];
  for (const m of modules) out.push(m.parameters === undefined ? { ...m, parameters: (await readModuleInfo(m.path)).parameters } : m);
  return out;
}

async function digestSource(source: DriverSource, recipe: BuildRecipe): Promise<string> {
  if (source.kind === 'directory') {
    const markers = sourceMarkers(recipe);
    let found = false;
    for (const marker of markers) found ||= await pathExists(join(source.path, marker));
    if (!found) {
      throw new SourceFetchError(`driver source directory ${source.path} has no ${markers.join(' or ')} (is the image's source tree mounted?)`, { path: source.path, expected: markers });
    }
    return `tree:${await digestSourceTree(source.path)}`;
  }
  return `tarball:${source.sha256.toLowerCase()}:strip=${source.stripComponents ?? 0}`;
}

/** Pure: files of which at least one must exist in a source directory for the recipe. */
function sourceMarkers(recipe: BuildRecipe): string[] {
  switch (recipe.kind) {
    case 'kbuild':
      return ['Kbuild', 'Makefile'];
    case 'make':
      return [join(recipe.directory, 'Makefile')];
    case 'dkms':
      return recipe.packages.map((p) => join(p.directory, 'dkms.conf'));
  }
}

async function prepareSources(options: BuildDriverOptions, work: string, sourceDir: string, log: Logger): Promise<void> {
  const source = options.source;
  if (source.kind === 'directory') {
    await cp(source.path, sourceDir, {
      recursive: true,
      filter: (path) => !isKbuildOutput(path.replace(/^.*\//, '')),
    });
    return;
  }
  const tarball = join(work, 'source.tar');
  await fetchTarball({
    url: source.url,
    sha256: source.sha256,
    destination: tarball,
    logger: log,
    signal: options.signal,
    ...(options.fetchAttempts === undefined ? {} : { attempts: options.fetchAttempts }),
    ...(options.fetchBackoffMs === undefined ? {} : { backoffMs: options.fetchBackoffMs }),
  });
  await mkdir(sourceDir);
  await extractTar({ file: tarball, cwd: sourceDir, strip: source.stripComponents ?? 0 });
}

async function writeGeneratedFiles(sourceDir: string, files: Readonly<Record<string, string>>): Promise<void> {
  for (const [relativePath, content] of Object.entries(files)) {
    const normalized = normalize(relativePath);
    if (isAbsolute(normalized) || normalized.startsWith('..')) {
      throw new BuildOutputError(`generated file path ${relativePath} must stay inside the source tree`, { relativePath });
    }
    const path = join(sourceDir, normalized);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, content);
  }
}

/** The .ko files kbuild lists in modules.order (absolute paths). */
async function modulesFromOrder(sourceDir: string): Promise<string[]> {
  let order: string;
  try {
    order = await readFile(join(sourceDir, 'modules.order'), 'utf8');
  } catch (error) {
    throw new BuildOutputError('kbuild succeeded but wrote no modules.order: the source tree builds no modules (is obj-m set?)', { sourceDir }, { cause: error });
  }
  const files = parseModulesOrder(order, sourceDir);
  if (files.length === 0) throw new BuildOutputError('kbuild built no modules (modules.order is empty)', { sourceDir });
  return files.map((file) => join(sourceDir, file));
}

/** Checks each .ko was built for the target kernel, signs it when asked, reads its modinfo. */
async function collectModules(files: readonly string[], options: BuildDriverOptions, headersDir: string): Promise<CacheEntryModule[]> {
  const modules: CacheEntryModule[] = [];
  for (const builtPath of files) {
    const file = builtPath;
    if (options.signing !== undefined) await signModule(headersDir, options.signing, builtPath);
    const info = await readModuleInfo(builtPath);
    if (info.kernelRelease !== options.kernelVersion) {
      throw new BuildOutputError(`${file} was built for kernel ${info.kernelRelease ?? '(no vermagic)'}, not ${options.kernelVersion}: the headers in ${headersDir} belong to another kernel`, {
        file,
        headersDir,
        builtFor: info.kernelRelease,
      });
    }
    if (modules.some((m) => m.name === info.name)) throw new BuildOutputError(`two built modules are named ${info.name}`, { name: info.name });
    modules.push({ name: info.name, builtPath, srcversion: info.srcversion, version: info.version, dependsOn: info.dependsOn, parameters: info.parameters });
  }
  return modules;
}
