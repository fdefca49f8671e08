import { z } from 'zod';
import { DriverRolloutError } from '../../shared/errors.ts';
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

const moduleFileSchema = z.object({
  name: z.string(),
  path: z.string(),
  srcversion: z.string().optional(),
  version: z.string().optional(),
  dependsOn: z.array(z.string()),
  parameters: z.array(z.string()).optional(),
  firmware: z.array(z.string()).optional(),
});

const lastGoodDriverSchema = z.object({
  driver: z.string(),
  version: z.string(),
  kernelVersion: z.string(),
  modules: z.array(moduleFileSchema),
  loaded: z.array(z.string()),
  optionsText: z.string(),
});

/** The last-good record on disk is not one: fields `path` (the file), `field` (`modules.0.path`, or `(JSON)`) and `problem`. */
export class LastGoodRecordError extends DriverRolloutError {}

/**
 * The record, or undefined when there is none. A file that is not a record (not JSON, a field
 * missing or of another type) throws LastGoodRecordError naming the file and the field: it is
 * never read as "no record".
 */
export async function readLastGoodDriver(path: string): Promise<LastGoodDriver | undefined> {
  const text = await readTextIfExists(path);
  if (text === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new LastGoodRecordError(`last good driver record ${path} is not JSON`, { path, field: '(JSON)', problem: 'not JSON' }, { cause: error });
  }
  const parsed = lastGoodDriverSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue === undefined || issue.path.length === 0 ? '(record)' : issue.path.join('.');
    const problem = issue?.message ?? 'invalid';
    throw new LastGoodRecordError(`last good driver record ${path}: ${field}: ${problem}`, { path, field, problem }, { cause: parsed.error });
  }
  const record = parsed.data;
  return { ...record, modules: record.modules.map((m) => ({ ...m, srcversion: m.srcversion, version: m.version })) };
}

/**
 * Pure: the record may be loaded again when a new driver fails: same kernel, and what of the
 * driver is loaded now is the record's (what ran before this reload) or the new build's (a reload
 * an earlier agent started and did not finish: killed after the unload, or between two modprobe
 * calls). Nothing loaded counts too (the old driver was unloaded by an agent that died, or the node
 * rebooted): the record is the last driver verified on this kernel. A module of another srcversion
 * (another agent's driver, one loaded by hand) is never replaced: the agent only brings back what it
 * knows. Loaded modules of other names (competing inbox modules) do not matter.
 */
export function isRestorableAfter(record: LastGoodDriver, kernelVersion: string, before: ReadonlyMap<string, LoadedModule>, built: readonly ModuleFile[]): boolean {
  if (record.kernelVersion !== kernelVersion) return false;
  const known = new Map<string, Set<string | undefined>>();
  for (const m of [...record.modules, ...built]) known.set(m.name, (known.get(m.name) ?? new Set()).add(m.srcversion));
  return [...before.values()].filter((m) => known.has(m.name)).every((m) => known.get(m.name)?.has(m.srcversion) === true);
}
