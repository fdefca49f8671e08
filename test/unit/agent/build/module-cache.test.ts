import { mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { lookUpCacheEntry, pruneModuleCache, storeCacheEntry, touchCacheEntry } from '../../../../agent/build/module-cache.ts';

// The cache's own rules on stand-in files (the real-compile path is in build-driver.test.ts).
describe('the module cache', () => {
  let dir: string;
  let koFile: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'module-cache-'));
    koFile = join(dir, 'built.ko');
    await writeFile(koFile, 'ELF stand-in');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function store(kernelVersion: string, cacheKey: string, driver = 'drsample'): Promise<void> {
    await storeCacheEntry(
      join(dir, 'cache'),
      { driver, version: '1.0.0', kernelVersion, cacheKey, signed: false, builtAt: '2026-01-01T00:00:00.000Z' },
      [{ name: 'drsample_core', builtPath: koFile, srcversion: 'ABC', version: '1.0.0', dependsOn: [] }],
    );
  }

  async function setUsedAt(kernelVersion: string, cacheKey: string, seconds: number): Promise<void> {
    await utimes(join(dir, 'cache', kernelVersion, cacheKey, 'manifest.json'), seconds, seconds);
  }

  it('a stored entry is a hit with its files verified; an unknown key is a miss', async () => {
    await store('6.1.0-56-amd64', 'k1');
    const hit = await lookUpCacheEntry(join(dir, 'cache'), '6.1.0-56-amd64', 'k1');
    expect(hit.status).toBe('hit');
    expect(hit.status === 'hit' && hit.modules.map((m) => [m.name, m.srcversion, m.path])).toEqual([
      ['drsample_core', 'ABC', join(dir, 'cache', '6.1.0-56-amd64', 'k1', 'drsample_core.ko')],
    ]);
    expect(await lookUpCacheEntry(join(dir, 'cache'), '6.1.0-56-amd64', 'k2')).toEqual({ status: 'miss' });
    expect(await lookUpCacheEntry(join(dir, 'cache'), '6.1.0-57-amd64', 'k1')).toEqual({ status: 'miss' });
  });

  it.each<[string, (entry: string) => Promise<void>, RegExp]>([
    ['a modified .ko', (entry) => writeFile(join(entry, 'drsample_core.ko'), 'tampered'), /drsample_core\.ko: sha256 [0-9a-f]{64} does not match/],
    ['a missing manifest', (entry) => rm(join(entry, 'manifest.json')), /manifest\.json is missing/],
    ['a manifest of another entry', (entry) => writeFile(join(entry, 'manifest.json'), JSON.stringify({ format: 1, driver: 'd', version: 'v', kernelVersion: 'x', cacheKey: 'other', signed: false, builtAt: '', modules: [{ name: 'a', file: 'a.ko', sha256: '0'.repeat(64), srcversion: null, version: null, dependsOn: [] }] })), /belongs to another entry/],
  ])('%s makes the entry corrupt', async (_name, corrupt, problem) => {
    await store('6.1.0-56-amd64', 'k1');
    await corrupt(join(dir, 'cache', '6.1.0-56-amd64', 'k1'));
    const lookup = await lookUpCacheEntry(join(dir, 'cache'), '6.1.0-56-amd64', 'k1');
    expect(lookup.status).toBe('corrupt');
    expect(lookup.status === 'corrupt' && lookup.problem).toMatch(problem);
  });

  it('storing over a corrupt entry replaces it, and leaves no temporary directory', async () => {
    await store('6.1.0-56-amd64', 'k1');
    await writeFile(join(dir, 'cache', '6.1.0-56-amd64', 'k1', 'drsample_core.ko'), 'tampered');
    await store('6.1.0-56-amd64', 'k1');
    expect((await lookUpCacheEntry(join(dir, 'cache'), '6.1.0-56-amd64', 'k1')).status).toBe('hit');
    expect(await readdir(join(dir, 'cache', '6.1.0-56-amd64'))).toEqual(['k1']);
  });

  it('pruning keeps the most recently used entries of the driver across kernels; a hit counts as a use', async () => {
    await store('6.1.0-55-amd64', 'other-driver', 'mofed');
    await setUsedAt('6.1.0-55-amd64', 'other-driver', 10);
    await store('6.1.0-55-amd64', 'old');
    await store('6.1.0-56-amd64', 'middle');
    await store('6.1.0-56-amd64', 'new');
    await setUsedAt('6.1.0-55-amd64', 'old', 1000);
    await setUsedAt('6.1.0-56-amd64', 'middle', 2000);
    await setUsedAt('6.1.0-56-amd64', 'new', 3000);
    await touchCacheEntry(join(dir, 'cache'), '6.1.0-55-amd64', 'old');
    expect(await pruneModuleCache(join(dir, 'cache'), 'drsample', 2)).toEqual(['6.1.0-56-amd64/middle']);
    expect((await lookUpCacheEntry(join(dir, 'cache'), '6.1.0-55-amd64', 'other-driver')).status).toBe('hit');
    expect((await lookUpCacheEntry(join(dir, 'cache'), '6.1.0-55-amd64', 'old')).status).toBe('hit');
    expect((await lookUpCacheEntry(join(dir, 'cache'), '6.1.0-56-amd64', 'new')).status).toBe('hit');
    expect(await pruneModuleCache(join(dir, 'cache-never-written'), 'drsample', 2)).toEqual([]);
  });
});
