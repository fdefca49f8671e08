import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ifExists, readTextIfExists } from '../fs/if-exists.ts';
import { sysfsModuleName, type LoadedModule } from './loaded-module.ts';

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
