import { glob, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BuildOutputError } from './build-errors.ts';
import type { CacheEntryModule } from './module-cache.ts';
import { pathExists } from '../../shared/fs/if-exists.ts';
import { readModuleInfo } from './read-module-info.ts';
import { parseModulesOrder } from './run-kbuild.ts';

/**
 * Modules the driver image carries ready-built, one directory per kernel release
 * (`<prebuiltDir>/<kernelVersion>/**\/*.ko`, as KMM's kernel mappings lay them out). Undefined
 * when the image has none for this kernel (then the agent builds). Every file is verified
 * before use: its vermagic must name `kernelVersion` and it must carry a srcversion (what the
 * agent compares with /sys/module after loading); otherwise BuildOutputError names the file.
 * Order: the directory's modules.order when present, else by path.
 */
export async function findPrebuiltModules(prebuiltDir: string, kernelVersion: string): Promise<CacheEntryModule[] | undefined> {
  const dir = join(prebuiltDir, kernelVersion);
  if (!(await pathExists(dir))) return undefined;
  let files: string[];
  if (await pathExists(join(dir, 'modules.order'))) {
    files = parseModulesOrder(await readFile(join(dir, 'modules.order'), 'utf8'), dir);
  } else {
    files = [];
    for await (const path of glob('**/*.ko', { cwd: dir })) files.push(path);
    files.sort();
  }
  if (files.length === 0) return undefined;
  const modules: CacheEntryModule[] = [];
  for (const file of files) {
    const builtPath = join(dir, file);
    if (!(await pathExists(builtPath))) throw new BuildOutputError(`prebuilt ${dir}/modules.order lists ${file}, which is missing`, { dir, file });
    const info = await readModuleInfo(builtPath);
    if (info.kernelRelease !== kernelVersion) {
      throw new BuildOutputError(`prebuilt module ${builtPath} was built for kernel ${info.kernelRelease ?? '(no vermagic)'}, not ${kernelVersion}`, {
        file: builtPath,
        builtFor: info.kernelRelease,
        kernelVersion,
      });
    }
    if (info.srcversion === undefined) {
      throw new BuildOutputError(`prebuilt module ${builtPath} has no srcversion, so the loaded module could not be verified against it`, { file: builtPath });
    }
    if (modules.some((m) => m.name === info.name)) throw new BuildOutputError(`two prebuilt modules are named ${info.name}`, { name: info.name, dir });
    modules.push({ name: info.name, builtPath, srcversion: info.srcversion, version: info.version, dependsOn: info.dependsOn, parameters: info.parameters });
  }
  return modules;
}
