import { execFile } from 'node:child_process';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BuildOutputError, CompileError, KernelHeadersMissingError, SourceFetchError } from '../../../../agent/build/build-errors.ts';
import type { BuiltDriver } from '../../../../agent/build/built-driver.ts';
import { cacheEntryDir } from '../../../../agent/build/module-cache.ts';
import { buildSampleDriver, installedHeadersKernel, SAMPLE_DRIVER_DIR } from './sample-driver.ts';

const run = promisify(execFile);

// Real kbuild against Debian's installed linux-headers; outputs go to temp dirs only.
describe('buildDriver with real kbuild (sample driver, Debian headers)', () => {
  let scratch: string;
  let cacheDir: string;
  let first: BuiltDriver;

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'build-driver-test-'));
    cacheDir = join(scratch, 'cache');
    first = await buildSampleDriver('1.0.0', cacheDir, { workDir: scratch });
  }, 120_000);
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it('compiles both modules in kbuild order, for the target kernel, with srcversions from modinfo', async () => {
    expect(first.cacheHit).toBe(false);
    expect(first.kernelVersion).toBe(installedHeadersKernel());
    expect(first.modules.map((m) => m.name)).toEqual(['drsample_core', 'drsample_net']);
    const [core, net] = first.modules;
    expect(core?.dependsOn).toEqual([]);
    expect(net?.dependsOn).toEqual(['drsample_core']);
    for (const m of first.modules) {
      expect(m.version).toBe('1.0.0');
      expect(m.path.startsWith(cacheEntryDir(cacheDir, first.kernelVersion, first.cacheKey))).toBe(true);
      const { stdout } = await run('modinfo', ['-F', 'srcversion', m.path]);
      expect(m.srcversion).toBe(stdout.trim());
      expect(m.srcversion).toMatch(/^[0-9A-F]{23}$/);
    }
  });

  it('a second run with the same inputs is a cache hit with the same modules', async () => {
    const second = await buildSampleDriver('1.0.0', cacheDir, { workDir: scratch, headersDirs: ['/nonexistent-headers-prove-no-compile'] });
    expect(second.cacheHit).toBe(true);
    expect(second.cacheKey).toBe(first.cacheKey);
    expect(second.modules).toEqual(first.modules);
  });

  it('another version gives another cache key and different srcversions', async () => {
    const other = await buildSampleDriver('2.0.0', cacheDir, { workDir: scratch });
    expect(other.cacheHit).toBe(false);
    expect(other.cacheKey).not.toBe(first.cacheKey);
    expect(other.modules.map((m) => m.srcversion)).not.toContain(first.modules[0]?.srcversion);
    expect(other.modules.map((m) => m.srcversion)).not.toContain(first.modules[1]?.srcversion);
  }, 120_000);

  it.each([
    ['a truncated .ko', async (path: string) => { await writeFile(path, (await readFile(path)).subarray(0, 100)); }],
    ['a deleted .ko', async (path: string) => { await rm(path); }],
    ['a garbled manifest', async (path: string) => { await writeFile(join(path, '..', 'manifest.json'), '{"format":'); }],
  ])('a corrupt cache entry (%s) is rebuilt, not used', async (_name, corrupt) => {
    const net = first.modules[1];
    if (net === undefined) throw new Error('no drsample_net');
    await corrupt(net.path);
    const rebuilt = await buildSampleDriver('1.0.0', cacheDir, { workDir: scratch });
    expect(rebuilt.cacheHit).toBe(false);
    expect(rebuilt.modules.map((m) => m.srcversion)).toEqual(first.modules.map((m) => m.srcversion));
    const again = await buildSampleDriver('1.0.0', cacheDir, { workDir: scratch });
    expect(again.cacheHit).toBe(true);
  }, 120_000);

  it('leaves no build directory or temporary cache entry behind', async () => {
    expect((await readdir(scratch)).filter((name) => name.startsWith('driver-rollout-build-'))).toEqual([]);
    expect((await readdir(join(cacheDir, first.kernelVersion))).filter((name) => name.startsWith('.tmp-'))).toEqual([]);
  });
});

describe('buildDriver failures end in clear errors', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'build-driver-fail-'));
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it('missing headers name the kernel and the Debian package to install', async () => {
    const attempt = buildSampleDriver('1.0.0', join(scratch, 'cache'), {
      kernelVersion: '6.1.0-999-amd64',
      headersDirs: [join(scratch, 'no-such-headers')],
    });
    await expect(attempt).rejects.toBeInstanceOf(KernelHeadersMissingError);
    await expect(attempt).rejects.toThrow(/kernel headers for 6\.1\.0-999-amd64 not found.*linux-headers-6\.1\.0-999-amd64/);
  });

  it('a source directory without Kbuild or Makefile is named in the error', async () => {
    const attempt = buildSampleDriver('1.0.0', join(scratch, 'cache'), { source: { kind: 'directory', path: join(scratch, 'no-sources') } });
    await expect(attempt).rejects.toBeInstanceOf(SourceFetchError);
    await expect(attempt).rejects.toThrow(/no-sources has no Kbuild or Makefile/);
  });

  it('a compile error carries the compiler\'s last lines', async () => {
    const broken = join(scratch, 'broken-driver');
    await cp(SAMPLE_DRIVER_DIR, broken, { recursive: true });
    await writeFile(join(broken, 'drsample_net.c'), '#include <linux/module.h>\nint this_does_not_compile = undeclared_identifier;\nMODULE_LICENSE("GPL");\n');
    const attempt = buildSampleDriver('1.0.0', join(scratch, 'cache'), { source: { kind: 'directory', path: broken }, workDir: scratch });
    await expect(attempt).rejects.toBeInstanceOf(CompileError);
    await expect(attempt).rejects.toThrow(/undeclared_identifier/);
  }, 120_000);

  it('headers of another kernel are refused (vermagic check)', async () => {
    const attempt = buildSampleDriver('1.0.0', join(scratch, 'cache'), {
      kernelVersion: '6.1.0-1-amd64',
      headersDirs: [`/usr/src/linux-headers-${installedHeadersKernel()}`],
      workDir: scratch,
    });
    await expect(attempt).rejects.toBeInstanceOf(BuildOutputError);
    await expect(attempt).rejects.toThrow(/built for kernel .* not 6\.1\.0-1-amd64/);
  }, 120_000);
});
