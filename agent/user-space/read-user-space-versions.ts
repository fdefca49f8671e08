import { lstat, readdir, readlink } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { execa } from 'execa';
import { ifExists } from '../../shared/fs/if-exists.ts';
import type { VersionReading } from './plan/judge-user-space.ts';
import { fileVersion, NVIDIA_SONAME, nvidiaSmiVersion, USER_SPACE_BINARY_DIRS, USER_SPACE_LIBRARY_DIRS } from './user-space-layout.ts';
import { UserSpaceUnreadableError } from './user-space-errors.ts';

/** A path found in the root: `inRoot` as the root's own processes see it, `path` as the agent reaches it. */
export interface RootPath {
  readonly inRoot: string;
  readonly path: string;
}

/** The user space of a driver root, each version read from the file itself. */
export interface UserSpaceVersions {
  readonly root: string;
  /**
   * One reading per NVIDIA soname link in every library directory (a stale copy in a second
   * directory is read too): the version of the file it resolves to.
   */
  readonly libraries: readonly VersionReading[];
  /** `nvidia-smi`'s own version; absent when the root has none. */
  readonly nvidiaSmi: VersionReading | undefined;
  /** Where the libraries were found (e.g. for `nvidia-persistenced --nvidia-cfg-path`). */
  readonly libraryDir: RootPath | undefined;
}

const MAX_LINKS = 8;
const NVIDIA_SMI_TIMEOUT_MS = 10_000;

/**
 * Reads the versions of NVIDIA's user space in `root` (a driver root: the image's `/`, or an
 * unpacked one): each soname link's target's file version, and `nvidia-smi -h`'s banner (run from
 * the root; it needs no driver). Links are resolved inside the root (an absolute target is taken
 * relative to it). Nothing is cached: every call reads the files again.
 */
export async function readUserSpaceVersions(root: string): Promise<UserSpaceVersions> {
  const libraries: VersionReading[] = [];
  let libraryDir: RootPath | undefined;
  for (const dir of USER_SPACE_LIBRARY_DIRS) {
    const names = (await ifExists(() => readdir(join(root, dir)))) ?? [];
    for (const name of names.filter((n) => NVIDIA_SONAME.test(n)).sort()) {
      libraryDir ??= { inRoot: `/${dir}`, path: join(root, dir) };
      const target = await resolveInRoot(root, `/${dir}/${name}`);
      const version = fileVersion(basename(target));
      if (version === undefined) throw new UserSpaceUnreadableError(`${join(root, dir, name)} resolves to ${target}, a file without a version in its name`, { root, library: name, target });
      libraries.push({ name, what: `/${dir}/${name} -> ${basename(target)}`, version });
    }
  }
  const smi = await findBinary(root, 'nvidia-smi');
  return { root, libraries, nvidiaSmi: smi === undefined ? undefined : await readNvidiaSmi(root, smi), libraryDir };
}

/** The first `name` in the root's binary directories (USER_SPACE_BINARY_DIRS), or undefined. */
export async function findBinary(root: string, name: string): Promise<RootPath | undefined> {
  for (const dir of USER_SPACE_BINARY_DIRS) {
    const inRoot = `/${dir}/${name}`;
    if ((await ifExists(() => lstat(join(root, inRoot)))) !== undefined) return { inRoot, path: join(root, await resolveInRoot(root, inRoot)) };
  }
  return undefined;
}

async function readNvidiaSmi(root: string, smi: RootPath): Promise<VersionReading> {
  const result = await execa(smi.path, ['-h'], { reject: false, all: true, timeout: NVIDIA_SMI_TIMEOUT_MS, stdin: 'ignore' });
  const version = nvidiaSmiVersion(result.all);
  if (version === undefined) {
    const said = result.all.trim().split('\n').slice(0, 2).join(' | ');
    throw new UserSpaceUnreadableError(`${smi.path} -h printed no version (exit ${result.exitCode ?? 'on a signal'}${said === '' ? '' : `: ${said}`})`, { root, path: smi.path, exitCode: result.exitCode });
  }
  return { name: 'nvidia-smi', what: smi.inRoot, version };
}

/** Follows symlinks of `inRoot` inside `root`; returns the final path as the root sees it. */
async function resolveInRoot(root: string, inRoot: string): Promise<string> {
  let current = inRoot;
  for (let i = 0; i < MAX_LINKS; i += 1) {
    const stat = await lstat(join(root, current));
    if (!stat.isSymbolicLink()) return current;
    const target = await readlink(join(root, current));
    current = isAbsolute(target) ? target : join(dirname(current), target);
  }
  throw new UserSpaceUnreadableError(`${join(root, inRoot)}: more than ${MAX_LINKS} symlinks`, { root, path: inRoot });
}

/** The first of the root's library directories (USER_SPACE_LIBRARY_DIRS) that holds `fileName`, or undefined. */
export async function findLibraryDir(root: string, fileName: string): Promise<RootPath | undefined> {
  for (const dir of USER_SPACE_LIBRARY_DIRS) {
    if ((await ifExists(() => lstat(join(root, dir, fileName)))) !== undefined) return { inRoot: `/${dir}`, path: join(root, dir) };
  }
  return undefined;
}
