import { basename } from 'node:path';
import { readModuleInfo } from '../build/read-module-info.ts';
import type { ModuleFile } from '../kernel/kernel-port.ts';
import { describeUserSpaceMismatch, judgeUserSpace, type VersionReading } from './plan/judge-user-space.ts';
import { readUserSpaceVersions, type UserSpaceVersions } from './read-user-space-versions.ts';
import { UserSpaceMismatchError } from './user-space-errors.ts';

/** The modules' versions as `modinfo` reads them from the .ko files (modules that declare none are left out). */
export async function readModuleFileVersions(modules: readonly ModuleFile[]): Promise<VersionReading[]> {
  const readings: VersionReading[] = [];
  for (const m of modules) {
    const { version } = await readModuleInfo(m.path);
    if (version !== undefined) readings.push({ name: m.name, what: `${basename(m.path)} (modinfo)`, version });
  }
  return readings;
}

/**
 * The version guard: reads the modules' versions and the driver root's user space from the files
 * themselves and throws UserSpaceMismatchError when they differ. Reads only; the caller runs it
 * before anything is unloaded. Returns what it read (the daemons are found through it).
 */
export async function checkUserSpace(driver: string, root: string, modules: readonly VersionReading[]): Promise<UserSpaceVersions> {
  const found = await readUserSpaceVersions(root);
  const userSpace = [...found.libraries, ...(found.nvidiaSmi === undefined ? [] : [found.nvidiaSmi])];
  const verdict = judgeUserSpace(modules, userSpace);
  if (verdict.kind === 'mismatch') {
    throw new UserSpaceMismatchError({
      driver,
      root,
      detail: describeUserSpaceMismatch(verdict),
      moduleVersions: verdict.moduleVersions,
      userSpaceVersions: [...new Set(verdict.differing.map((r) => r.version))],
      missing: verdict.missing,
    });
  }
  return found;
}
