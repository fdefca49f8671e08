import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, isAbsolute, join, normalize } from 'node:path';
import { performance } from 'node:perf_hooks';
import { x as extractTar } from 'tar';
import type { Logger } from '../../shared/logger.ts';
import { BuildOutputError, SourceFetchError } from './build-errors.ts';
import type { BuiltDriver, BuiltModule } from './built-driver.ts';
import { computeBuildKey } from './compute-build-key.ts';
import { digestSourceTree, isKbuildOutput } from './digest-source-tree.ts';
import { fetchTarball } from './fetch-tarball.ts';
import { defaultHeadersDirs, findKernelHeaders } from './find-kernel-headers.ts';
import { lookUpCacheEntry, pruneModuleCache, removeCacheEntry, sha256OfFile, storeCacheEntry, touchCacheEntry, type CacheEntryModule } from './module-cache.ts';
import { readModuleInfo } from './read-module-info.ts';
import { pathExists } from '../../shared/fs/if-exists.ts';
import { parseModulesOrder, runKbuild } from './run-kbuild.ts';
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
  /** `NAME=value` arguments passed to make. */
  readonly makeVariables?: Readonly<Record<string, string>>;
  /** Sign every module with `scripts/sign-file` of the headers (Secure Boot). */
  readonly signing?: ModuleSigningKey | undefined;
  /** kbuild trees to try, in order (default: /lib/modules/<kver>/build, /usr/src/linux-headers-<kver>). */
  readonly headersDirs?: readonly string[];
  /** Parent of the temporary build directory (default: the OS temp dir). */
  readonly workDir?: string;
  /** make -j (default: available CPUs). */
  readonly jobs?: number;
  /** Cache entries kept (most recently used, across kernels) after a build; default 8. */
  readonly cacheEntriesKept?: number;
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
  const generatedFiles = options.generatedFiles ?? {};
  const makeVariables = options.makeVariables ?? {};
  const cacheKey = computeBuildKey({
    kernelVersion: options.kernelVersion,
    sourceDigest: await digestSource(options.source),
    generatedFiles,
    makeVariables,
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

  const headersDir = await findKernelHeaders(options.kernelVersion, options.headersDirs ?? defaultHeadersDirs(options.kernelVersion));
  const work = await mkdtemp(join(options.workDir ?? tmpdir(), `driver-rollout-build-${options.driver}-`));
  try {
    const sourceDir = join(work, 'src');
    await prepareSources(options, work, sourceDir, log);
    await writeGeneratedFiles(sourceDir, generatedFiles);
    log.info({ headersDir, sourceDir }, 'compiling driver modules with kbuild');
    await runKbuild({ headersDir, sourceDir, kernelVersion: options.kernelVersion, makeVariables, jobs: options.jobs ?? availableParallelism(), signal: options.signal });
    const modules = await collectModules(sourceDir, options, headersDir);
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

/** Entries stored before declared parameters were recorded get them from modinfo (no rebuild). */
async function withDeclaredParameters(modules: readonly BuiltModule[]): Promise<BuiltModule[]> {
  const out: BuiltModule[] = [];
  for (const m of modules) out.push(m.parameters === undefined ? { ...m, parameters: (await readModuleInfo(m.path)).parameters } : m);
  return out;
}

async function digestSource(source: DriverSource): Promise<string> {
  if (source.kind === 'directory') {
    if (!(await pathExists(join(source.path, 'Kbuild'))) && !(await pathExists(join(source.path, 'Makefile')))) {
      throw new SourceFetchError(`driver source directory ${source.path} has no Kbuild or Makefile (is the image's source tree mounted?)`, { path: source.path });
    }
    return `tree:${await digestSourceTree(source.path)}`;
  }
  return `tarball:${source.sha256.toLowerCase()}:strip=${source.stripComponents ?? 0}`;
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

/** Reads modules.order, checks each .ko was built for the target kernel, signs it when asked. */
async function collectModules(sourceDir: string, options: BuildDriverOptions, headersDir: string): Promise<CacheEntryModule[]> {
  let order: string;
  try {
    order = await readFile(join(sourceDir, 'modules.order'), 'utf8');
  } catch (error) {
    throw new BuildOutputError('kbuild succeeded but wrote no modules.order: the source tree builds no modules (is obj-m set?)', { sourceDir }, { cause: error });
  }
  const files = parseModulesOrder(order, sourceDir);
  if (files.length === 0) throw new BuildOutputError('kbuild built no modules (modules.order is empty)', { sourceDir });
  const modules: CacheEntryModule[] = [];
  for (const file of files) {
    const builtPath = join(sourceDir, file);
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
