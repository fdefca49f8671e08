import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDriver } from '../../agent/build/build-driver.ts';
import { BuildConfigError, CompileError } from '../../agent/build/build-errors.ts';
import { installedHeadersKernel } from '../unit/agent/build/sample-driver.ts';
import { DKMS_PAIR_DIR, DKMS_PAIR_PACKAGES, ensureDkmsPairModules, type VendorModules } from './ensure-vendor-builds.ts';
import { modinfoField } from './vendor-modinfo.ts';

// MOFED's layout in miniature (test/fixtures/dkms-pair): drpair-base has a PRE_BUILD configure step
// and exports a symbol; drpair-user includes its headers and links against its Module.symvers.
describe('two DKMS packages of one driver build in order, the second against the first (real dkms)', () => {
  const kernel = installedHeadersKernel();
  let pair: VendorModules;
  let scratch: string;

  beforeAll(async () => {
    pair = await ensureDkmsPairModules(kernel);
    scratch = await mkdtemp(join(tmpdir(), 'dkms-pair-test-'));
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  const build = (packages: typeof DKMS_PAIR_PACKAGES) =>
    buildDriver({
      driver: 'drpair',
      version: '1.0',
      kernelVersion: kernel,
      source: { kind: 'directory', path: DKMS_PAIR_DIR },
      cacheDir: join(scratch, 'cache'),
      recipe: { kind: 'dkms', packages },
      jobs: 2,
      logger: pino({ level: 'silent' }),
    });

  it("yields both modules in package order; dkms ran the base's PRE_BUILD configure; the user module depends on the base's symbol", async () => {
    expect(pair.built.modules.map((m) => m.name)).toEqual(['drpair_base', 'drpair_user']);
    expect(pair.built.modules[1]?.dependsOn).toEqual(['drpair_base']);
    for (const path of Object.values(pair.files)) expect(await modinfoField(path, 'configured_for')).toEqual([kernel]);
  });

  it('a second build of the same inputs is a cache hit', async () => {
    const again = await ensureDkmsPairModules(kernel);
    expect(again.built.cacheHit).toBe(true);
    expect(again.built.cacheKey).toBe(pair.built.cacheKey);
  });

  it('in the wrong order the second package cannot name the first: a BuildConfigError before anything compiles', async () => {
    const reversed = [DKMS_PAIR_PACKAGES[1], DKMS_PAIR_PACKAGES[0]].filter((p) => p !== undefined);
    await expect(build(reversed)).rejects.toThrow(BuildConfigError);
    await expect(build(reversed)).rejects.toThrow(/\{built:drpair-base\} names no DKMS package built before this one/);
  });

  it("without the hand-over (the user package alone) the build fails in dkms, and the CompileError quotes dkms's make.log", async () => {
    const alone = DKMS_PAIR_PACKAGES.slice(1).map((p) => ({ ...p, variables: { DRPAIR_BASE_DIR: '/nonexistent-base-build' } }));
    const error: unknown = await build(alone).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CompileError);
    expect((error as CompileError).outputTail).toMatch(/dkms make\.log[\s\S]*drpair_base\.h: No such file or directory/);
  });
});
