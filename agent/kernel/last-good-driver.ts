import { readTextIfExists } from '../../shared/fs/if-exists.ts';
import type { LoadedModule } from '../../shared/kmod/loaded-module.ts';
import type { ModuleFile } from './kernel-port.ts';
import { writeConfigFile } from './write-config-file.ts';

/**
 * The last driver this agent loaded and verified on the node: its modules (paths in the module
 * cache, which outlives the pod), version and modprobe options. Written after every verified
 * load, read when a new driver fails to load after the old one was unloaded.
 */
export interface LastGoodDriver {
  readonly driver: string;
  readonly version: string;
  readonly kernelVersion: string;
  readonly modules: readonly ModuleFile[];
  /** The modules modprobe was asked for. */
  readonly loaded: readonly string[];
  /** The options file's text at that load. */
  readonly optionsText: string;
}

export async function writeLastGoodDriver(path: string, record: LastGoodDriver): Promise<void> {
  await writeConfigFile(path, `${JSON.stringify(record, null, 2)}\n`);
}

/** The record, or undefined when there is none (or it cannot be parsed: then nothing is restored). */
export async function readLastGoodDriver(path: string): Promise<LastGoodDriver | undefined> {
  const text = await readTextIfExists(path);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as LastGoodDriver;
  } catch {
    return undefined;
  }
}

/**
 * Pure: the record describes what was running before the unload: same kernel, and every module
 * that was loaded has the recorded srcversion (none missing). Anything else (another agent's
 * driver, a module loaded by hand) is not restored: the agent only brings back what it knows.
 */
export function isLastGoodOf(record: LastGoodDriver, kernelVersion: string, before: ReadonlyMap<string, LoadedModule>): boolean {
  if (record.kernelVersion !== kernelVersion) return false;
  const recorded = new Map(record.modules.map((m) => [m.name, m.srcversion]));
  const ours = [...before.values()].filter((m) => recorded.has(m.name));
  return ours.length > 0 && record.loaded.every((name) => before.has(name)) && ours.every((m) => m.srcversion === recorded.get(m.name));
}
