import { createHash, randomBytes } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { BuiltModule } from './built-driver.ts';
import { ifExists, pathExists, readTextIfExists } from '../../shared/fs/if-exists.ts';

/**
 * The module cache on a host path: `<cacheDir>/<kernelVersion>/<cacheKey>/` holds the .ko files
 * and `manifest.json`, which lists each file's sha256. An entry appears atomically (written in a
 * `.tmp-*` directory, then renamed), and an entry whose files do not match its manifest (a crash
 * mid-copy on a filesystem without ordered writes, a disk error, a hand edit) is reported as
 * corrupt so the caller rebuilds it.
 */
const manifestSchema = z.object({
  format: z.literal(1),
  driver: z.string(),
  version: z.string(),
  kernelVersion: z.string(),
  cacheKey: z.string(),
  signed: z.boolean(),
  builtAt: z.string(),
  modules: z
    .array(
      z.object({
        name: z.string(),
        file: z.string().regex(/^[\w.-]+\.ko$/),
        sha256: z.string().regex(/^[0-9a-f]{64}$/),
        srcversion: z.string().nullable(),
        version: z.string().nullable(),
        dependsOn: z.array(z.string()),
        // Absent in entries written before declared parameters were recorded.
        parameters: z.array(z.string()).optional(),
      }),
    )
    .min(1),
});

export type CacheManifest = z.infer<typeof manifestSchema>;

export type CacheLookup =
  | { readonly status: 'hit'; readonly manifest: CacheManifest; readonly modules: readonly BuiltModule[] }
  | { readonly status: 'miss' }
  | { readonly status: 'corrupt'; readonly problem: string };

export function cacheEntryDir(cacheDir: string, kernelVersion: string, cacheKey: string): string {
  return join(cacheDir, kernelVersion, cacheKey);
}

/** Reads and verifies an entry: every file listed in the manifest must exist with its sha256. */
export async function lookUpCacheEntry(cacheDir: string, kernelVersion: string, cacheKey: string): Promise<CacheLookup> {
  const dir = cacheEntryDir(cacheDir, kernelVersion, cacheKey);
  const text = await readTextIfExists(join(dir, 'manifest.json'));
  if (text === undefined) {
    return (await pathExists(dir)) ? { status: 'corrupt', problem: 'manifest.json is missing' } : { status: 'miss' };
  }
  let manifest: CacheManifest;
  try {
    manifest = manifestSchema.parse(JSON.parse(text));
  } catch (error) {
    return { status: 'corrupt', problem: `manifest.json is unreadable: ${(error as Error).message}` };
  }
  if (manifest.cacheKey !== cacheKey || manifest.kernelVersion !== kernelVersion) {
    return { status: 'corrupt', problem: 'manifest.json belongs to another entry' };
  }
  const modules: BuiltModule[] = [];
  for (const m of manifest.modules) {
    const path = join(dir, m.file);
    const actual = await sha256OfFileOrUndefined(path);
    if (actual !== m.sha256) {
      return { status: 'corrupt', problem: `${m.file}: sha256 ${actual ?? '(missing)'} does not match the manifest's ${m.sha256}` };
    }
    modules.push({ name: m.name, path, sha256: m.sha256, srcversion: m.srcversion ?? undefined, version: m.version ?? undefined, dependsOn: m.dependsOn, parameters: m.parameters });
  }
  return { status: 'hit', manifest, modules };
}

export interface CacheEntryModule {
  readonly name: string;
  /** The .ko produced by the build; copied into the entry as `<name>.ko`. */
  readonly builtPath: string;
  readonly srcversion: string | undefined;
  readonly version: string | undefined;
  readonly dependsOn: readonly string[];
  readonly parameters?: readonly string[] | undefined;
}

/**
 * Writes an entry atomically, replacing any existing (corrupt) one. Returns the modules as they
 * lie in the cache. Interrupted writes leave only `.tmp-*` directories, removed by the next store.
 */
export async function storeCacheEntry(
  cacheDir: string,
  entry: Omit<CacheManifest, 'format' | 'modules'>,
  modules: readonly CacheEntryModule[],
): Promise<BuiltModule[]> {
  const parent = join(cacheDir, entry.kernelVersion);
  await mkdir(parent, { recursive: true });
  await removeStaleTemporaries(parent, entry.cacheKey);
  const tmp = join(parent, `.tmp-${entry.cacheKey}-${randomBytes(6).toString('hex')}`);
  await mkdir(tmp);
  try {
    const listed: CacheManifest['modules'] = [];
    for (const m of modules) {
      const file = `${m.name}.ko`;
      await copyFile(m.builtPath, join(tmp, file));
      listed.push({
        name: m.name,
        file,
        sha256: await sha256OfFile(join(tmp, file)),
        srcversion: m.srcversion ?? null,
        version: m.version ?? null,
        dependsOn: [...m.dependsOn],
        parameters: m.parameters === undefined ? undefined : [...m.parameters],
      });
    }
    const manifest: CacheManifest = { format: 1, ...entry, modules: listed };
    await writeFile(join(tmp, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    const final = cacheEntryDir(cacheDir, entry.kernelVersion, entry.cacheKey);
    await rm(final, { recursive: true, force: true });
    await rename(tmp, final);
    return listed.map((m) => ({
      name: m.name,
      path: join(final, m.file),
      sha256: m.sha256,
      srcversion: m.srcversion ?? undefined,
      version: m.version ?? undefined,
      dependsOn: m.dependsOn,
      parameters: m.parameters,
    }));
  } catch (error) {
    await rm(tmp, { recursive: true, force: true });
    throw error;
  }
}

/** Marks an entry as just used (the manifest's mtime), so pruning keeps it. */
export async function touchCacheEntry(cacheDir: string, kernelVersion: string, cacheKey: string): Promise<void> {
  const now = new Date();
  await utimes(join(cacheEntryDir(cacheDir, kernelVersion, cacheKey), 'manifest.json'), now, now);
}

/**
 * Keeps the `keep` most recently used entries of `driver` (by manifest mtime, across kernels) and
 * removes its others, so a node that saw many kernels and driver versions does not fill its disk.
 * Entries of other drivers sharing the cache directory (a GPU and a NIC agent) are left alone;
 * entries without a readable manifest count as the oldest of every driver. Returns the removed
 * entries as `<kernel>/<key>`.
 */
export async function pruneModuleCache(cacheDir: string, driver: string, keep: number): Promise<string[]> {
  const entries: { kernel: string; key: string; usedAt: number }[] = [];
  for (const kernel of await readdirOrEmpty(cacheDir)) {
    // `.work` holds builds in progress (buildDriver's default workDir), never cache entries.
    if (kernel.startsWith('.')) continue;
    for (const key of await readdirOrEmpty(join(cacheDir, kernel))) {
      if (key.startsWith('.tmp-')) continue;
      const manifest = join(cacheDir, kernel, key, 'manifest.json');
      const owner = await readFile(manifest, 'utf8').then((text) => (JSON.parse(text) as { driver?: unknown }).driver, () => undefined);
      if (owner !== undefined && owner !== driver) continue;
      const usedAt = owner === undefined ? 0 : await stat(manifest).then((s) => s.mtimeMs, () => 0);
      entries.push({ kernel, key, usedAt });
    }
  }
  const removed: string[] = [];
  for (const entry of entries.sort((a, b) => b.usedAt - a.usedAt).slice(keep)) {
    await removeCacheEntry(cacheDir, entry.kernel, entry.key);
    removed.push(`${entry.kernel}/${entry.key}`);
  }
  return removed;
}

async function readdirOrEmpty(path: string): Promise<string[]> {
  return (await ifExists(() => readdir(path))) ?? [];
}

export async function removeCacheEntry(cacheDir: string, kernelVersion: string, cacheKey: string): Promise<void> {
  await rm(cacheEntryDir(cacheDir, kernelVersion, cacheKey), { recursive: true, force: true });
}

export async function sha256OfFile(path: string): Promise<string> {
  return createHash('sha256').update(await readFile(path)).digest('hex');
}

function sha256OfFileOrUndefined(path: string): Promise<string | undefined> {
  return ifExists(() => sha256OfFile(path));
}

async function removeStaleTemporaries(parent: string, cacheKey: string): Promise<void> {
  for (const name of await readdir(parent)) {
    if (name.startsWith(`.tmp-${cacheKey}-`)) await rm(join(parent, name), { recursive: true, force: true });
  }
}
