import { execa } from 'execa';
import { sysfsModuleName } from '../../shared/kmod/loaded-module.ts';
import { BuildOutputError } from './build-errors.ts';
import { describeCommandFailure } from './describe-command-failure.ts';

/** The fields of a .ko file's .modinfo section that the agent relies on. */
export interface ModuleInfo {
  readonly name: string;
  readonly srcversion: string | undefined;
  readonly version: string | undefined;
  readonly dependsOn: readonly string[];
  /** First word of vermagic: the kernel release the module was built for. */
  readonly kernelRelease: string | undefined;
  /** Names of the parameters the module declares (`parm:` lines; those without a description too). */
  readonly parameters: readonly string[];
}

/**
 * Parses `modinfo <file.ko>` output (`key:   value` lines; `parm`, `alias` etc. repeat).
 * `name` comes from the `name:` field (present since Linux 4.x) or the file name.
 */
export function parseModinfo(text: string, fileName: string): ModuleInfo {
  const fields = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^([\w.-]+):\s*(.*)$/.exec(line);
    if (match?.[1] !== undefined && !fields.has(match[1])) fields.set(match[1], (match[2] ?? '').trim());
  }
  const nonEmpty = (key: string): string | undefined => {
    const value = fields.get(key);
    return value === undefined || value === '' ? undefined : value;
  };
  const fallbackName = fileName.replace(/^.*\//, '').replace(/\.ko(\.[gx]z|\.zst)?$/, '');
  return {
    name: sysfsModuleName(nonEmpty('name') ?? fallbackName),
    srcversion: nonEmpty('srcversion'),
    version: nonEmpty('version'),
    dependsOn: (nonEmpty('depends') ?? '').split(',').filter((d) => d !== '').map(sysfsModuleName),
    kernelRelease: nonEmpty('vermagic')?.split(/\s+/)[0],
    parameters: text
      .split('\n')
      .map((line) => /^parm:\s*([^:\s]+):/.exec(line)?.[1])
      .filter((name) => name !== undefined),
  };
}

/** Runs `modinfo` on a .ko file. */
export async function readModuleInfo(path: string): Promise<ModuleInfo> {
  const result = await execa('modinfo', [path], { reject: false });
  if (result.exitCode !== 0) {
    throw new BuildOutputError(`modinfo ${path} failed: ${describeCommandFailure(result)}`, { path, exitCode: result.exitCode });
  }
  return parseModinfo(result.stdout, path);
}
