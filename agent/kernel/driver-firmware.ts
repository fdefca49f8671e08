import { copyFile, mkdir, readdir, readFile, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { pathExists, readTextIfExists } from '../../shared/fs/if-exists.ts';
import { describeCommandFailure } from '../build/describe-command-failure.ts';
import { FirmwareMissingError, FirmwareUncheckableError, KernelCommandError } from './kernel-errors.ts';
import type { ModuleFile } from './kernel-port.ts';
import { writeConfigFile } from './write-config-file.ts';

/**
 * Where a driver's firmware comes from and where the kernel finds it. `request_firmware()` runs
 * in the kernel and resolves paths in the HOST's mount namespace, so every path here must be
 * the host's path, mounted at the same path in the container.
 */
export interface FirmwareOptions {
  /** Firmware shipped with the driver (in the image), e.g. `nvidia/580.142/gsp_ga10x.bin` under it. */
  readonly sourceDir?: string | undefined;
  /**
   * A host directory the driver owns: the source is copied there and the kernel's custom
   * firmware path (`/sys/module/firmware_class/parameters/path`) points at it while the driver runs.
   */
  readonly hostDir?: string | undefined;
  /** The host's own firmware roots, searched as the kernel does (default: /lib/firmware with its updates/ and per-kernel dirs). */
  readonly hostRoots?: readonly string[] | undefined;
  /** /sys/module/firmware_class/parameters/path (tests point it elsewhere). */
  readonly classPathFile?: string | undefined;
  /** Reads the firmware a module declares; default `modinfo -F firmware`, or the ModuleFile's own list. */
  readonly readDeclared?: ((file: ModuleFile) => Promise<readonly string[]>) | undefined;
}

export const FIRMWARE_CLASS_PATH = '/sys/module/firmware_class/parameters/path';

/** The kernel's built-in search list (drivers/base/firmware_loader/main.c fw_path), after the custom path. */
export function hostFirmwareDirs(kernelVersion: string, roots: readonly string[] = ['/lib/firmware']): string[] {
  return roots.flatMap((root) => [join(root, 'updates', kernelVersion), join(root, 'updates'), join(root, kernelVersion), root]);
}

/**
 * Before anything is unloaded: every firmware file the modules to load declare exists in the
 * driver's firmware (source or host dir) or the host's search dirs; else FirmwareMissingError
 * naming the files and where they were looked for. A place that cannot be checked (EACCES, ELOOP,
 * EIO) is not read as "absent": FirmwareUncheckableError names the module, the file and the path.
 */
export async function checkDeclaredFirmware(modules: readonly ModuleFile[], kernelVersion: string, options: FirmwareOptions): Promise<void> {
  const dirs = [options.sourceDir, options.hostDir, ...hostFirmwareDirs(kernelVersion, options.hostRoots)].filter((d) => d !== undefined);
  const read = options.readDeclared ?? ((file: ModuleFile) => (file.firmware === undefined ? readDeclaredFirmware(file.path) : Promise.resolve(file.firmware)));
  const missing: string[] = [];
  for (const module of modules) {
    for (const name of await read(module)) {
      if (!(await existsInAny(dirs, name, module.name))) missing.push(`${module.name} needs ${name}`);
    }
  }
  if (missing.length > 0) {
    throw new FirmwareMissingError(`firmware missing: ${missing.join('; ')} (looked in ${dirs.join(', ')}); nothing was unloaded`, { missing, searched: dirs });
  }
}

/**
 * Copies the driver's firmware into its host dir and points the kernel's custom firmware path
 * there, returning the value it had. Files are merged, not replaced: firmware names carry the
 * release (nvidia/<version>/gsp_*.bin), so the previous driver's files stay for a rollback.
 * No-op without a source and host dir. The path parameter is written without a newline: the
 * kernel copies the string verbatim and would search "<dir>\n/...".
 * The path it had is recorded first (PATH_BEFORE_FILE) and returned by every later call.
 * The path is switched only after every file is in place, and each file appears under its name
 * whole (see copyFirmwareTree): an agent killed during the copy leaves no truncated firmware the
 * kernel could load, and the next copy finishes it.
 */
export async function installDriverFirmware(options: FirmwareOptions): Promise<{ readonly previousPath: string } | undefined> {
  if (options.sourceDir === undefined || options.hostDir === undefined) return undefined;
  await copyFirmwareTree(options.sourceDir, options.hostDir);
  const classPath = options.classPathFile ?? FIRMWARE_CLASS_PATH;
  const current = (await readFile(classPath, 'utf8')).trim();
  const record = join(options.hostDir, PATH_BEFORE_FILE);
  if (current === options.hostDir) return { previousPath: (await readTextIfExists(record)) ?? current };
  await writeConfigFile(record, current);
  await writeFile(classPath, options.hostDir);
  return { previousPath: current };
}

/**
 * In the host dir: the firmware_class path before the agent first pointed it there, so an agent
 * started after one that died (the path already switched) still knows what to put back on stop.
 */
export const PATH_BEFORE_FILE = '.firmware-class-path-before';

/** Suffix of a firmware file being copied; renamed to its name once whole. */
export const PARTIAL_FIRMWARE_SUFFIX = '.driver-rollout-partial';

/**
 * Merges `source` into `target`: every file is copied to `<name>.driver-rollout-partial` and
 * renamed to its name (atomic on one file system), symbolic links are made the same way. A
 * partial file an earlier, killed copy left is overwritten and renamed by this one; a partial
 * file with no source any more is removed.
 */
async function copyFirmwareTree(source: string, target: string): Promise<void> {
  await mkdir(target, { recursive: true });
  const names = new Set<string>();
  for (const entry of await readdir(source, { withFileTypes: true })) {
    names.add(entry.name);
    const from = join(source, entry.name);
    const to = join(target, entry.name);
    const partial = `${to}${PARTIAL_FIRMWARE_SUFFIX}`;
    if (entry.isDirectory()) {
      await copyFirmwareTree(from, to);
    } else if (entry.isSymbolicLink()) {
      await rm(partial, { force: true });
      await symlink(await readlink(from), partial);
      await rename(partial, to);
    } else {
      await copyFile(from, partial);
      await rename(partial, to);
    }
  }
  for (const name of await readdir(target)) {
    if (name.endsWith(PARTIAL_FIRMWARE_SUFFIX) && !names.has(name.slice(0, -PARTIAL_FIRMWARE_SUFFIX.length))) await rm(join(target, name), { force: true });
  }
}

/** Puts the kernel's custom firmware path back (on stop, after the driver was unloaded). */
export async function restoreFirmwarePath(previousPath: string, classPathFile: string = FIRMWARE_CLASS_PATH): Promise<void> {
  // An empty write would leave "" either way; the kernel accepts it as "no custom path".
  await writeFile(classPathFile, previousPath === '' ? '\0' : previousPath);
}

/** `modinfo -F firmware <ko>`: one name per line (NVIDIA: nvidia/<version>/gsp_*.bin). */
export async function readDeclaredFirmware(path: string): Promise<string[]> {
  const result = await execa('modinfo', ['-F', 'firmware', path], { reject: false });
  if (result.exitCode !== 0) {
    throw new KernelCommandError({ command: `modinfo -F firmware ${path}`, exitCode: result.exitCode, stderr: describeCommandFailure(result) });
  }
  return result.stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '');
}

async function existsInAny(dirs: readonly string[], name: string, module: string): Promise<boolean> {
  for (const dir of dirs) {
    const path = join(dir, name);
    try {
      if (await pathExists(path)) return true;
    } catch (error) {
      const code = typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : 'unknown';
      throw new FirmwareUncheckableError(`firmware ${path} that ${module} needs cannot be checked (${code}); nothing was unloaded`, { module, firmware: name, path, code }, { cause: error });
    }
  }
  return false;
}
