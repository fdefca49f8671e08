import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ifExists, readTextIfExists } from '../fs/if-exists.ts';

/**
 * A loaded kernel module as /sys/module/<name> shows it. A module is loaded when
 * `/sys/module/<name>/refcnt` exists (built-in modules have a directory but no refcnt).
 */
export interface LoadedModule {
  readonly name: string;
  /** Users of the module: other modules (holders) plus open files, mounts, etc. */
  readonly refcnt: number;
  /** Modules that use symbols of this one: `/sys/module/<name>/holders/*`. */
  readonly holders: readonly string[];
  /** Present only for modules built with MODULE_VERSION (or a kernel that adds it). */
  readonly srcversion: string | undefined;
  readonly version: string | undefined;
  /** Current values of the module's parameters readable from `/sys/module/<name>/parameters`. */
  readonly parameters: Readonly<Record<string, string>>;
}

/** The kernel spells module names with `_` in /sys/module even when the file uses `-`. */
export function sysfsModuleName(name: string): string {
  return name.replaceAll('-', '_');
}

/** Reads one module, or returns undefined when it is not loaded. `sysModule` is normally `/sys/module`. */
export async function readLoadedModule(sysModule: string, name: string): Promise<LoadedModule | undefined> {
  const dir = join(sysModule, sysfsModuleName(name));
  const refcntText = await readOptional(join(dir, 'refcnt'));
  if (refcntText === undefined) return undefined;
  const refcnt = Number.parseInt(refcntText, 10);
  return {
    name: sysfsModuleName(name),
    refcnt: Number.isNaN(refcnt) ? 0 : refcnt,
    holders: (await listOptional(join(dir, 'holders'))).sort(),
    srcversion: await readOptional(join(dir, 'srcversion')),
    version: await readOptional(join(dir, 'version')),
    parameters: await readParameters(join(dir, 'parameters')),
  };
}

async function readParameters(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const p of await listOptional(dir)) {
    const value = await readOptional(join(dir, p));
    if (value !== undefined) out[p] = value;
  }
  return out;
}

/** sysfs parameter files can be write-only: EACCES/EPERM on read means "no readable value". */
const UNREADABLE = { alsoCodes: ['EACCES', 'EPERM'] };

async function readOptional(path: string): Promise<string | undefined> {
  return (await readTextIfExists(path, UNREADABLE))?.trim();
}

async function listOptional(path: string): Promise<string[]> {
  return (await ifExists(() => readdir(path), UNREADABLE)) ?? [];
}
