import type { ModuleParameters } from './modprobe-config.ts';

/**
 * Module parameters from a ConfigMap mounted as a directory, one `<module>.conf` file per module
 * (the GPU Operator's `kernelModuleConfig` convention): `name=value` items separated by white
 * space or new lines, `#` to the end of a line a comment. `nvidia-uvm.conf` configures
 * `nvidia_uvm`. The chart puts the checksum of the same files (module-config-sha256.ts) into the pod
 * template, so an edit is a new driver identity and rolls out like any other change; the agent
 * refuses files that do not match the checksum its template names. Pure.
 */

export interface ModuleConfigFile {
  /** The file name, `<module>.conf`. */
  readonly name: string;
  readonly content: string;
}

export interface ParsedModuleConfig {
  readonly parameters: ModuleParameters;
  /** `<file>: <problem>` per item that is not `name=value`, or file not named `<module>.conf`. */
  readonly problems: readonly string[];
}

const CONF_FILE = /^([A-Za-z0-9_-]+)\.conf$/;
const ITEM = /^([A-Za-z0-9_]+)=(.*)$/;

/** Files that are not `<module>.conf` (the kubelet's `..data` links, README) are not module config. */
export function isModuleConfigFile(name: string): boolean {
  return CONF_FILE.test(name);
}

export function parseModuleConfig(files: readonly ModuleConfigFile[]): ParsedModuleConfig {
  const parameters: Record<string, Record<string, string>> = {};
  const problems: string[] = [];
  for (const file of files) {
    const module = CONF_FILE.exec(file.name)?.[1]?.replaceAll('-', '_');
    if (module === undefined) {
      problems.push(`${file.name}: not named <module>.conf`);
      continue;
    }
    const items = file.content.split('\n').flatMap((line) => line.replace(/#.*$/, '').split(/\s+/)).filter((item) => item !== '');
    for (const item of items) {
      const m = ITEM.exec(item);
      if (m?.[1] === undefined || m[2] === undefined) {
        problems.push(`${file.name}: "${item}" is not parameter=value`);
        continue;
      }
      (parameters[module] ??= {})[m[1]] = m[2];
    }
  }
  return { parameters, problems };
}

/** `extra` over `base`, parameter by parameter: a file's value wins over MODULE_PARAMETERS'. */
export function mergeModuleParameters(base: ModuleParameters, extra: ModuleParameters): ModuleParameters {
  const merged: Record<string, Record<string, string>> = {};
  for (const source of [base, extra]) {
    for (const [module, values] of Object.entries(source)) merged[module] = { ...merged[module], ...values };
  }
  return merged;
}
