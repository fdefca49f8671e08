import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDriver } from '../../agent/build/build-driver.ts';
import { BuildConfigError, BuildOutputError } from '../../agent/build/build-errors.ts';
import type { MakeRecipe } from '../../agent/build/build-recipe.ts';
import type { BuiltDriver } from '../../agent/build/built-driver.ts';
import { installedHeadersKernel } from '../unit/agent/build/sample-driver.ts';
import { modinfoField, vermagicRelease } from './vendor-modinfo.ts';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'vendor-makefile');
const RECIPE: MakeRecipe = {
  kind: 'make',
  directory: '.',
  targets: ['modules'],
  variables: { SYSSRC: '{kernelSource}', SYSOUT: '{kernelOutput}', VENDOR_MODULES: 'vmake_a vmake_b' },
  modules: 'kernel/*.ko',
};

// test/fixtures/vendor-makefile is shaped like NVIDIA's tree: `make modules SYSSRC= SYSOUT=` and a
// module list with spaces. (NVIDIA's own tree goes through the dkms recipe in nvidia-dkms.test.ts;
// building it a second time through `make` does not fit the shared builder's budget.)
describe("the make recipe runs a vendor's Makefile (real make and kbuild)", () => {
  const kernel = installedHeadersKernel();
  let scratch: string;
  let first: BuiltDriver;
  const build = (recipe: MakeRecipe, extra: { headersDirs?: string[] } = {}) =>
    buildDriver({ driver: 'vmake', version: '1.0', kernelVersion: kernel, source: { kind: 'directory', path: FIXTURE }, cacheDir: join(scratch, 'cache'), recipe, jobs: 2, logger: pino({ level: 'silent' }), ...extra });

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'make-recipe-test-'));
    // Would add a third module if the agent's environment leaked into make.
    process.env['VENDOR_LEAK_MODULE'] = 'vmake_c';
    try {
      first = await build(RECIPE);
    } finally {
      delete process.env['VENDOR_LEAK_MODULE'];
    }
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it('builds exactly the listed modules (a value with spaces) for the kernel, with SYSSRC the split headers\' -common tree; nothing leaks from the environment', async () => {
    expect(first.modules.map((m) => m.name)).toEqual(['vmake_a', 'vmake_b']);
    for (const m of first.modules) {
      expect(await vermagicRelease(m.path)).toBe(kernel);
      const syssrc = (await modinfoField(m.path, 'built_against'))[0];
      expect(syssrc).toMatch(/\/linux-headers-.*-common$/);
    }
  });

  it('a second build of the same inputs is a cache hit (no headers needed); another variable value is another key', async () => {
    const again = await build(RECIPE, { headersDirs: ['/nonexistent-headers-prove-no-compile'] });
    expect(again.cacheHit).toBe(true);
    expect(again.cacheKey).toBe(first.cacheKey);
    const one = await build({ ...RECIPE, variables: { ...RECIPE.variables, VENDOR_MODULES: 'vmake_b' } });
    expect(one.cacheKey).not.toBe(first.cacheKey);
    expect(one.modules.map((m) => m.name)).toEqual(['vmake_b']);
  });

  it('a pattern matching no module and an unknown placeholder are clear errors', async () => {
    await expect(build({ ...RECIPE, modules: 'nowhere/*.ko' })).rejects.toThrow(BuildOutputError);
    await expect(build({ ...RECIPE, variables: { SYSSRC: '{kernelSrc}' } })).rejects.toThrow(BuildConfigError);
  });
});
