import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDriver } from '../../agent/build/build-driver.ts';
import { BuildOutputError } from '../../agent/build/build-errors.ts';
import { installedHeadersKernel } from '../unit/agent/build/sample-driver.ts';
import { ensureDkmsPairModules, type VendorModules } from './ensure-vendor-builds.ts';

// A driver image that carries modules per kernel release (KMM's kernel mappings), here the
// dkms-pair fixture's real modules copied into <prebuilt>/<kernel>/.
describe('prebuilt modules in the image are verified and used without compiling', () => {
  const kernel = installedHeadersKernel();
  let scratch: string;
  let pair: VendorModules;
  const useOrBuild = (prebuiltDir: string, kernelVersion = kernel) =>
    buildDriver({
      driver: 'drpair',
      version: '1.0',
      kernelVersion,
      // Nothing to compile from: a build would fail on the missing source and headers.
      source: { kind: 'directory', path: join(scratch, 'no-sources') },
      cacheDir: join(scratch, 'cache'),
      headersDirs: ['/nonexistent-headers-prove-no-compile'],
      prebuiltDir,
      logger: pino({ level: 'silent' }),
    });

  beforeAll(async () => {
    pair = await ensureDkmsPairModules(kernel);
    scratch = await mkdtemp(join(tmpdir(), 'prebuilt-test-'));
    await mkdir(join(scratch, 'image', kernel), { recursive: true });
    for (const [name, path] of Object.entries(pair.files)) await copyFile(path, join(scratch, 'image', kernel, `${name}.ko`));
    // The same files filed under another kernel's directory: their vermagic says otherwise.
    await mkdir(join(scratch, 'image', '6.1.0-99-amd64'), { recursive: true });
    for (const [name, path] of Object.entries(pair.files)) await copyFile(path, join(scratch, 'image', '6.1.0-99-amd64', `${name}.ko`));
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it("uses the running kernel's directory: same srcversions, nothing compiled", async () => {
    const built = await useOrBuild(join(scratch, 'image'));
    expect(built.prebuilt).toBe(true);
    expect(built.modules.map((m) => [m.name, m.srcversion])).toEqual(pair.built.modules.map((m) => [m.name, m.srcversion]));
    expect(built.modules.map((m) => m.dependsOn)).toEqual([[], ['drpair_base']]);
  });

  it('refuses modules whose vermagic names another kernel than their directory', async () => {
    await expect(useOrBuild(join(scratch, 'image'), '6.1.0-99-amd64')).rejects.toThrow(BuildOutputError);
    await expect(useOrBuild(join(scratch, 'image'), '6.1.0-99-amd64')).rejects.toThrow(`prebuilt module ${join(scratch, 'image', '6.1.0-99-amd64', 'drpair_base.ko')} was built for kernel ${kernel}, not 6.1.0-99-amd64`);
  });

  it('without a directory for the kernel it falls back to building (here: no sources, a clear error)', async () => {
    await expect(useOrBuild(join(scratch, 'image'), '6.1.0-98-amd64')).rejects.toThrow(/has no Kbuild or Makefile/);
  });
});
