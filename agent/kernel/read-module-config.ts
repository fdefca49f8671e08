import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DriverRolloutError } from '../../shared/errors.ts';
import { moduleConfigSha256 } from './module-config-sha256.ts';
import { isModuleConfigFile, parseModuleConfig, type ModuleConfigFile } from './plan/module-config.ts';
import type { ModuleParameters } from './plan/modprobe-config.ts';

/**
 * The module config directory does not hold what the pod's template names: a file that is not
 * `parameter=value`, or contents whose checksum is not MODULE_CONFIG_SHA256 (the ConfigMap was
 * edited outside the chart, or this pod predates the change: the rollout of the new template
 * replaces it). Nothing is loaded with it; the agent retries, as after any failed step.
 */
export class ModuleConfigError extends DriverRolloutError {}

export interface ModuleConfigSource {
  /** The mounted ConfigMap (`<module>.conf` files). */
  readonly dir: string;
  /** The checksum the pod template names; undefined: not checked. */
  readonly sha256: string | undefined;
}

/** Reads, checks and parses the module config directory (module-config.ts). */
export async function readModuleConfig(source: ModuleConfigSource): Promise<ModuleParameters> {
  let names: string[];
  try {
    names = (await readdir(source.dir)).filter(isModuleConfigFile).sort();
  } catch (error) {
    throw new ModuleConfigError(`cannot read the module config directory ${source.dir}`, { dir: source.dir }, { cause: error });
  }
  const files: ModuleConfigFile[] = [];
  for (const name of names) files.push({ name, content: await readFile(join(source.dir, name), 'utf8') });
  const sha256 = moduleConfigSha256(files);
  if (source.sha256 !== undefined && sha256 !== source.sha256) {
    throw new ModuleConfigError(
      `the module config in ${source.dir} (${names.join(', ') || 'no files'}, sha256 ${sha256}) is not the one this pod's template names (MODULE_CONFIG_SHA256 ${source.sha256}): it was changed after the template was made; the rollout of the new template replaces this pod`,
      { dir: source.dir, sha256, expected: source.sha256 },
    );
  }
  const parsed = parseModuleConfig(files);
  if (parsed.problems.length > 0) {
    throw new ModuleConfigError(`the module config in ${source.dir} is invalid: ${parsed.problems.join('; ')}`, { dir: source.dir, problems: parsed.problems });
  }
  return parsed.parameters;
}
