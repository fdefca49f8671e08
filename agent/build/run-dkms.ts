import { appendFile, chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { BuildOutputError, CompileError } from './build-errors.ts';
import type { DkmsPackage } from './build-recipe.ts';
import { expandBuildVariables, type BuildPlaceholders } from './expand-build-variables.ts';
import type { KernelTrees } from './find-kernel-trees.ts';
import { parseDkmsConf, type DkmsConf } from './parse-dkms-conf.ts';
import { pathExists } from '../../shared/fs/if-exists.ts';
import { runBuildCommand } from './run-build-command.ts';

export interface DkmsBuildRequest {
  /** The writable copy of the driver sources; each package is a directory in it with a dkms.conf. */
  readonly sourceDir: string;
  readonly packages: readonly DkmsPackage[];
  /** Scratch directory for dkms's private trees (dkms, source, install) and kept build trees. */
  readonly work: string;
  readonly kernelVersion: string;
  readonly kernelTrees: KernelTrees;
  /** `uname -m` (dkms's `-a`). */
  readonly arch: string;
  readonly jobs: number;
  /** Lowest CPU and I/O priority (see runBuildCommand). */
  readonly background?: boolean | undefined;
  readonly signal?: AbortSignal | undefined;
}

export interface DkmsBuildResult {
  /** Every package's modules (BUILT_MODULE_* records), in package then record order. */
  readonly files: readonly string[];
  /** The dkms.conf of each package, in order. */
  readonly packages: readonly DkmsConf[];
}

/** The script the agent adds as POST_BUILD to keep a package's build tree for the packages after it. */
export const KEEP_BUILD_SCRIPT = 'driver-rollout-keep-build.sh';

/**
 * dkms's own module signing is switched off through its `sign_file` variable (dkms 3 reads it
 * from the environment when framework.conf does not set it): the agent signs with its own key,
 * and dkms would otherwise create /var/lib/dkms/mok.key.
 */
const NO_DKMS_SIGNING = { sign_file: '/nonexistent/driver-rollout-signs-modules-itself' };

/**
 * Builds the packages in order with the real dkms (`add`, then `build -k <kernel>`), in private
 * trees under `work`: the host's /var/lib/dkms, /usr/src and /lib/modules are never touched and
 * `dkms install` never runs. dkms runs the packages' PRE_BUILD (configure) steps itself. Each
 * package but the last keeps its build tree (headers, Module.symvers) through a POST_BUILD
 * wrapper that first runs the package's own POST_BUILD; later packages see those trees as
 * `{built:<PACKAGE_NAME>}` and get their Module.symvers in KBUILD_EXTRA_SYMBOLS.
 */
export async function runDkms(request: DkmsBuildRequest): Promise<DkmsBuildResult> {
  const trees = { dkms: join(request.work, 'dkms'), source: join(request.work, 'dkms-source'), install: join(request.work, 'dkms-install') };
  await Promise.all(Object.values(trees).map((dir) => mkdir(dir, { recursive: true })));
  const built: Record<string, string> = {};
  const files: string[] = [];
  const confs: DkmsConf[] = [];
  for (const [index, pkg] of request.packages.entries()) {
    const field = `build-recipe.packages[${index}]`;
    const packageDir = join(request.sourceDir, pkg.directory);
    const confPath = join(packageDir, 'dkms.conf');
    if (!(await pathExists(confPath))) {
      throw new BuildOutputError(`${field}.directory: ${pkg.directory} has no dkms.conf`, { field, directory: pkg.directory });
    }
    const conf = parseDkmsConf(await readFile(confPath, 'utf8'), { kernelver: request.kernelVersion, arch: request.arch }, `${pkg.directory}/dkms.conf`);
    const placeholders: BuildPlaceholders = {
      kernel: request.kernelVersion,
      kernelSource: request.kernelTrees.source,
      kernelOutput: request.kernelTrees.output,
      arch: request.arch,
      jobs: String(request.jobs),
      built,
    };
    const variables = expandBuildVariables(pkg.variables, placeholders, `${field}.variables`);
    const keep = index < request.packages.length - 1 ? join(request.work, 'kept', conf.packageName) : undefined;
    const registered = join(trees.source, `${conf.packageName}-${conf.packageVersion}`);
    await rename(packageDir, registered);
    if (keep !== undefined) await addKeepBuildStep(registered, conf);

    const symvers: string[] = [];
    for (const dir of Object.values(built)) if (await pathExists(join(dir, 'Module.symvers'))) symvers.push(join(dir, 'Module.symvers'));
    const env = {
      ...variables,
      ...(symvers.length === 0 || variables['KBUILD_EXTRA_SYMBOLS'] !== undefined ? {} : { KBUILD_EXTRA_SYMBOLS: symvers.join(' ') }),
      ...(keep === undefined ? {} : { DRIVER_ROLLOUT_KEEP_BUILD_DIR: keep }),
      ...NO_DKMS_SIGNING,
    };
    const common = ['-m', conf.packageName, '-v', conf.packageVersion, '--dkmstree', trees.dkms, '--sourcetree', trees.source, '--installtree', trees.install];
    const run = (args: string[]): Promise<string> =>
      runBuildCommand({ command: 'dkms', args, env, home: request.work, kernelVersion: request.kernelVersion, background: request.background, signal: request.signal });
    await run(['add', ...common]);
    try {
      await run(['build', ...common, '-k', request.kernelVersion, '-a', request.arch, '-j', String(request.jobs), '--kernelsourcedir', request.kernelTrees.output]);
    } catch (error) {
      // dkms prints only "consult make.log", and the log goes with the scratch tree: keep its tail.
      throw await withMakeLog(error, join(trees.dkms, conf.packageName, conf.packageVersion, 'build', 'make.log'));
    }

    const moduleDir = join(trees.dkms, conf.packageName, conf.packageVersion, request.kernelVersion, request.arch, 'module');
    for (const record of conf.modules) {
      const file = join(moduleDir, `${record.destName}.ko`);
      if (!(await pathExists(file))) {
        throw new BuildOutputError(`dkms built ${conf.packageName} ${conf.packageVersion} but ${basename(file)} (BUILT_MODULE_NAME ${record.builtName}) is not in ${moduleDir}`, {
          package: conf.packageName,
          file,
        });
      }
      files.push(file);
    }
    if (keep !== undefined) {
      if (!(await pathExists(keep))) throw new BuildOutputError(`dkms built ${conf.packageName} but its POST_BUILD did not keep the build tree in ${keep}`, { package: conf.packageName, keep });
      built[conf.packageName] = keep;
    }
    confs.push(conf);
  }
  return { files, packages: confs };
}

const MAKE_LOG_TAIL_LINES = 60;

/** A CompileError whose output tail is make.log's (the compiler's errors), else the error as it was. */
async function withMakeLog(error: unknown, makeLog: string): Promise<unknown> {
  if (!(error instanceof CompileError)) return error;
  let log: string;
  try {
    log = await readFile(makeLog, 'utf8');
  } catch {
    return error;
  }
  const tail = log.trimEnd().split('\n').slice(-MAKE_LOG_TAIL_LINES).join('\n');
  const fields = error.fields as { kernelVersion: string; command: string; exitCode: number | undefined };
  return new CompileError({ ...fields, outputTail: `${error.outputTail}\n--- dkms make.log (last ${MAKE_LOG_TAIL_LINES} lines) ---\n${tail}` }, error);
}

/**
 * Appends to the registered copy's dkms.conf a POST_BUILD that runs the package's own POST_BUILD
 * (as dkms would: a path relative to the build tree, with its arguments) and then copies the build
 * tree to $DRIVER_ROLLOUT_KEEP_BUILD_DIR; dkms deletes the build tree right after POST_BUILD.
 */
async function addKeepBuildStep(packageDir: string, conf: DkmsConf): Promise<void> {
  const script = [
    '#!/bin/sh',
    '# Added by driver-rollout: keeps this package\'s build tree for the DKMS packages built after it.',
    'set -e',
    'if [ $# -gt 0 ]; then',
    '  own=$1; shift',
    '  if [ -x "./$own" ]; then "./$own" "$@"; else echo "driver-rollout: POST_BUILD $own is not executable; skipped as dkms would" >&2; fi',
    'fi',
    'mkdir -p "$DRIVER_ROLLOUT_KEEP_BUILD_DIR"',
    'cp -a . "$DRIVER_ROLLOUT_KEEP_BUILD_DIR"',
    '',
  ].join('\n');
  const path = join(packageDir, KEEP_BUILD_SCRIPT);
  await writeFile(path, script);
  await chmod(path, 0o755);
  const own = conf.postBuild === undefined ? '' : ` ${conf.postBuild}`;
  await appendFile(join(packageDir, 'dkms.conf'), `\n# Added by driver-rollout (see ${KEEP_BUILD_SCRIPT}).\nPOST_BUILD="${KEEP_BUILD_SCRIPT}${own.replaceAll('"', '\\"')}"\n`);
}
