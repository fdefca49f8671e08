import { copyFile, mkdir, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { sysfsModuleName, type LoadedModule } from '../../shared/kmod/loaded-module.ts';
import { readLoadedModule } from '../../shared/kmod/read-loaded-module.ts';
import type { Logger } from '../../shared/logger.ts';
import { describeCommandFailure } from '../build/describe-command-failure.ts';
import { KernelCommandError, ModuleBusyError } from './kernel-errors.ts';
import type { KernelPort, LoadStep, ModuleFile, ModuleTree } from './kernel-port.ts';

export interface RealKernelOptions {
  /** Normally /sys/module; tests point it at a fixture tree. */
  readonly sysModuleDir?: string;
  readonly logger: Logger;
  /** Per command; a module whose init hangs must not hang the agent forever (default 300 s). */
  readonly commandTimeoutMs?: number;
}

/** Directories modprobe reads by default; a configDir among them is not passed as `-C`. */
const DEFAULT_MODPROBE_DIRS = new Set(['/etc/modprobe.d', '/run/modprobe.d', '/usr/local/lib/modprobe.d', '/lib/modprobe.d', '/usr/lib/modprobe.d']);

/**
 * The node's kernel through kmod's tools (modprobe, rmmod, depmod) and /sys/module.
 * Never uses `rmmod -f` or `modprobe --force*`.
 */
export function createRealKernel(options: RealKernelOptions): KernelPort {
  const sysModuleDir = options.sysModuleDir ?? '/sys/module';
  const timeout = options.commandTimeoutMs ?? 300_000;

  const runTool = async (file: string, args: readonly string[]): Promise<string> => {
    const command = [file, ...args].join(' ');
    options.logger.debug({ command }, 'running kernel module tool');
    const result = await execa(file, args, { reject: false, timeout });
    if (result.exitCode === 0 && !result.timedOut) return result.stdout;
    const fields = { command, exitCode: result.exitCode, stderr: describeCommandFailure(result, timeout) };
    throw file === 'rmmod' && /in use/i.test(result.stderr) ? new ModuleBusyError(fields) : new KernelCommandError(fields);
  };

  return {
    readModule: (name) => readLoadedModule(sysModuleDir, name),

    async listLoaded() {
      const out: LoadedModule[] = [];
      for (const name of (await readdir(sysModuleDir)).sort()) {
        const module = await readLoadedModule(sysModuleDir, name);
        if (module !== undefined) out.push(module);
      }
      return out;
    },

    async installModules(tree, subdir, modules) {
      await copyIntoTree(tree, subdir, modules);
      await runTool('depmod', ['-b', tree.root, tree.kernelVersion]);
    },

    async resolveLoadOrder(tree, modules) {
      // --show-depends is modprobe's dry run that ignores what is loaded now (plain --dry-run
      // skips loaded modules, so before an unload it would print nothing for the old driver).
      const stdout = await runTool('modprobe', ['--show-depends', ...treeArgs(tree), '-a', ...modules]);
      return parseShowDepends(stdout);
    },

    async load(tree, module) {
      await runTool('modprobe', [...treeArgs(tree), module]);
    },

    async unload(module) {
      await runTool('rmmod', [sysfsModuleName(module)]);
    },
  };
}

function treeArgs(tree: ModuleTree): string[] {
  const config = DEFAULT_MODPROBE_DIRS.has(tree.configDir.replace(/\/+$/, '')) ? [] : ['-C', tree.configDir];
  return ['-d', tree.root, '-S', tree.kernelVersion, ...config];
}

/** The modules' directory in the tree: `<root>/lib/modules/<kver>/updates/<subdir>` (see KernelPort.installModules). */
export function installDir(tree: ModuleTree, subdir: string): string {
  return join(tree.root, 'lib', 'modules', tree.kernelVersion, 'updates', subdir);
}

/** Replaces the subdir's contents by `modules` (as `<name>.ko`) via a sibling temp dir and rename. */
async function copyIntoTree(tree: ModuleTree, subdir: string, modules: readonly ModuleFile[]): Promise<void> {
  const dir = installDir(tree, subdir);
  const tmp = `${dir}.tmp-${randomBytes(6).toString('hex')}`;
  await mkdir(tmp, { recursive: true });
  try {
    for (const m of modules) await copyFile(m.path, join(tmp, `${m.name}.ko`));
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  } catch (error) {
    await rm(tmp, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Parses `modprobe --show-depends` output: `insmod <path> <options>` per module, dependencies
 * first; `builtin <name>` for modules compiled into the kernel. With several modules
 * the shared dependencies repeat; the first occurrence keeps its place.
 */
export function parseShowDepends(stdout: string): LoadStep[] {
  const steps: LoadStep[] = [];
  for (const line of stdout.split('\n')) {
    const step = parseShowDependsLine(line.trim());
    if (step !== undefined && !steps.some((s) => s.module === step.module)) steps.push(step);
  }
  return steps;
}

function parseShowDependsLine(line: string): LoadStep | undefined {
  const builtin = /^builtin\s+(\S+)$/.exec(line);
  if (builtin?.[1] !== undefined) return { kind: 'builtin', module: sysfsModuleName(builtin[1]), path: '', options: '' };
  const insmod = /^insmod\s+(\S+)\s*(.*)$/.exec(line);
  if (insmod?.[1] === undefined) return undefined;
  const path = insmod[1];
  const module = sysfsModuleName(path.replace(/^.*\//, '').replace(/\.ko(\.[gx]z|\.zst)?$/, ''));
  return { kind: 'insmod', module, path, options: (insmod[2] ?? '').trim() };
}
