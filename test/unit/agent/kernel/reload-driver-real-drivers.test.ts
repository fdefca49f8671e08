import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DriverRolledBackError,
  FirmwareMissingError,
  HeldByUserModulesError,
  ModuleDependencyError,
  ModuleLoadError,
} from '../../../../agent/kernel/kernel-errors.ts';
import type { ModuleFile, ModuleTree } from '../../../../agent/kernel/kernel-port.ts';
import { readLastGoodDriver } from '../../../../agent/kernel/last-good-driver.ts';
import { LOAD_PLANS } from '../../../../agent/kernel/plan/load-plan.ts';
import { reloadDriver, type DriverToLoad, type ReloadDriverOptions } from '../../../../agent/kernel/reload-driver.ts';
import { SimulatedKernel } from '../../../doubles/simulated-kernel.ts';
import { silentLogger } from '../build/sample-driver.ts';
import { aSampleDriver, aScratch, fakeSrcversion, type Scratch } from './fixtures.ts';

const KVER = '6.1.0-56-amd64';

function aModule(name: string, version: string, dependsOn: string[], extra: Partial<ModuleFile> = {}): ModuleFile {
  return { name, path: `/cache/${KVER}/${version}/${name}.ko`, srcversion: fakeSrcversion(name, version), version, dependsOn, firmware: [], ...extra };
}

/** NVIDIA's open modules as modinfo describes them (real-drivers.md §1.1): inbox drm, video, drm_kms_helper. */
function anNvidiaDriver(version: string): DriverToLoad {
  return {
    driver: 'gpu',
    version,
    kernelVersion: KVER,
    modules: [
      aModule('nvidia', version, ['drm'], { firmware: [`nvidia/${version}/gsp_ga10x.bin`, `nvidia/${version}/gsp_tu10x.bin`] }),
      aModule('nvidia_uvm', version, ['nvidia']),
      aModule('nvidia_modeset', version, ['video', 'nvidia']),
      aModule('nvidia_drm', version, ['drm', 'drm_kms_helper', 'nvidia_modeset']),
      aModule('nvidia_peermem', version, []),
    ],
  };
}

/** The kernel's own modules in the host's tree (/lib/modules), as the simulated kernel's inbox. */
const INBOX: readonly ModuleFile[] = [
  aModule('drm', 'inbox', []),
  aModule('drm_kms_helper', 'inbox', ['drm']),
  aModule('video', 'inbox', []),
  aModule('i2c_core', 'inbox', []),
  aModule('ipmi_msghandler', 'inbox', []),
  aModule('ipmi_devintf', 'inbox', ['ipmi_msghandler']),
  aModule('ib_core', 'inbox', []),
  aModule('nvme_rdma', 'inbox', ['ib_core']),
];

describe('reloadDriver for real drivers (simulated kernel: what the QEMU guest showed, see test/kernel)', () => {
  let scratch: Scratch;
  let kernel: SimulatedKernel;
  let hostTree: ModuleTree;
  let firmwareDir: string;
  const ops = (): string[] => kernel.history.filter((e) => e.op !== 'depmod').map((e) => `${e.op} ${e.module}`);
  const loaded = async (): Promise<string[]> => (await kernel.listLoaded()).map((m) => `${m.name}@${m.version ?? ''}`);
  const options = (extra: Partial<ReloadDriverOptions> = {}): ReloadDriverOptions => ({
    tree: scratch.tree,
    hostTree,
    logger: silentLogger(),
    lastGoodFile: join(scratch.dir, 'cache', 'last-good', `gpu-${KVER}.json`),
    ...extra,
  });
  const nvidia = (extra: Partial<ReloadDriverOptions> = {}): ReloadDriverOptions =>
    options({ loadPlan: LOAD_PLANS.nvidia, firmware: { hostRoots: [firmwareDir] }, ...extra });

  beforeEach(async () => {
    scratch = await aScratch('reload-real-drivers-');
    kernel = new SimulatedKernel({ sysModuleDir: scratch.sysModuleDir, runningKernelVersion: KVER });
    hostTree = { root: join(scratch.dir, 'host'), kernelVersion: KVER, configDir: scratch.tree.configDir };
    await kernel.installModules(hostTree, '../kernel', INBOX);
    firmwareDir = join(scratch.dir, 'lib-firmware');
    for (const version of ['580.142', '580.200']) {
      await mkdir(join(firmwareDir, 'nvidia', version), { recursive: true });
      for (const chip of ['ga10x', 'tu10x']) await writeFile(join(firmwareDir, 'nvidia', version, `gsp_${chip}.bin`), 'firmware');
    }
  });
  afterEach(async () => {
    await rm(scratch.dir, { recursive: true, force: true });
  });

  it("loads NVIDIA's plan: preloads from the host tree, inbox dependencies from the host tree, nvidia-drm and nvidia-peermem left out", async () => {
    const result = await reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia());
    expect(result.outcome).toBe('loaded-fresh');
    expect(result.preloaded).toEqual(['i2c_core', 'ipmi_msghandler', 'ipmi_devintf', 'drm', 'video']);
    expect(result.loadOrder.map((s) => s.module)).toEqual(['nvidia', 'nvidia_uvm', 'nvidia_modeset']);
    expect(result.loadOrder.every((s) => s.path.startsWith(`${scratch.tree.root}/`))).toBe(true);
    expect(await loaded()).toEqual(['drm@inbox', 'i2c_core@inbox', 'ipmi_devintf@inbox', 'ipmi_msghandler@inbox', 'nvidia@580.142', 'nvidia_modeset@580.142', 'nvidia_uvm@580.142', 'video@inbox']);
  });

  it('loads nvidia-drm when enabled and nvidia-peermem only while the NIC stack (ib_core) is loaded', async () => {
    await kernel.load(hostTree, 'ib_core');
    const result = await reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia({ enableOptional: ['nvidia-drm'] }));
    expect(result.loadOrder.map((s) => s.module)).toEqual(['nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm', 'nvidia_peermem']);
    expect(result.preloaded).toContain('drm_kms_helper');
  });

  it('refuses, before unloading, inbox dependencies the host tree does not have', async () => {
    await reloadDriver(kernel, aSampleDriver('1.0.0'), options());
    const [core, net] = aSampleDriver('2.0.0').modules as [ModuleFile, ModuleFile];
    const attempt = reloadDriver(kernel, { ...aSampleDriver('2.0.0'), modules: [core, { ...net, dependsOn: ['drsample_core', 'crc8'] }] }, options());
    await expect(attempt).rejects.toBeInstanceOf(ModuleDependencyError);
    await expect(attempt).rejects.toThrow("the host's module tree cannot provide the driver's inbox dependencies (crc8); nothing was unloaded");
    expect(ops().filter((op) => op.startsWith('rmmod'))).toEqual([]);
  });

  it("refuses to use the host's own tree as the driver's module root", async () => {
    await expect(reloadDriver(kernel, aSampleDriver('1.0.0'), options({ tree: { ...scratch.tree, root: hostTree.root } }))).rejects.toThrow(
      "is the host's module tree: install into a root the driver owns",
    );
  });

  it('names the module that failed, not the one modprobe was asked for, and leaves none of the driver loaded', async () => {
    kernel.failInit('nvidia', 'No such device');
    const attempt = reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia({ loadModules: ['nvidia_uvm'] }));
    await expect(attempt).rejects.toBeInstanceOf(ModuleLoadError);
    await expect(attempt).rejects.toThrow(
      "nvidia failed to load: could not insert 'nvidia_uvm': No such device; modprobe nvidia_uvm names nvidia_uvm, the kernel refused nvidia; no driver module left loaded",
    );
    expect((await loaded()).filter((m) => m.startsWith('nvidia'))).toEqual([]);
  });

  /**
   * The simulated kernel fails inits by module name; only the new build's insert must fail in the
   * rollback specs, so the failure is lifted at the third nvidia_modeset insert (the rollback's).
   */
  async function useKernelLiftingModesetFailureAtThirdInsert(): Promise<void> {
    let modesetInserts = 0;
    kernel = new SimulatedKernel({
      sysModuleDir: scratch.sysModuleDir,
      runningKernelVersion: KVER,
      loadDurationMs: (module) => {
        if (module === 'nvidia_modeset' && ++modesetInserts === 3) kernel.clearInitFailure(module);
        return 0;
      },
    });
    await kernel.installModules(hostTree, '../kernel', INBOX);
  }

  it('rolls back to the last good driver when the new one fails to load after the old one was unloaded', async () => {
    await useKernelLiftingModesetFailureAtThirdInsert();
    await reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia({ parameters: { nvidia: {} } }));
    kernel.failInit('nvidia_modeset', 'No such device');
    const attempt = reloadDriver(kernel, anNvidiaDriver('580.200'), nvidia());
    await expect(attempt).rejects.toThrow(DriverRolledBackError);
    await expect(attempt).rejects.toThrow(
      "nvidia_modeset failed to load: could not insert 'nvidia_modeset': No such device; no driver module left loaded; rolled back to the last good driver 580.142 (nvidia, nvidia_uvm, nvidia_modeset loaded and verified)",
    );
    expect((await loaded()).filter((m) => m.startsWith('nvidia'))).toEqual(['nvidia@580.142', 'nvidia_modeset@580.142', 'nvidia_uvm@580.142']);
    expect((await kernel.readModule('nvidia'))?.srcversion).toBe(fakeSrcversion('nvidia', '580.142'));
    // The record still names the driver that runs.
    expect((await readLastGoodDriver(options().lastGoodFile ?? ''))?.version).toBe('580.142');
  });

  // An agent killed after the unload (or a reboot) leaves nothing of the driver loaded: the next
  // agent's failing load still ends on the last driver verified on this kernel.
  it('rolls back to the last good driver when nothing of the driver is loaded any more and the new one fails', async () => {
    await useKernelLiftingModesetFailureAtThirdInsert();
    await reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia());
    for (const m of ['nvidia_modeset', 'nvidia_uvm', 'nvidia']) await kernel.unload(m);
    kernel.failInit('nvidia_modeset', 'No such device');
    const attempt = reloadDriver(kernel, anNvidiaDriver('580.200'), nvidia());
    await expect(attempt).rejects.toThrow(DriverRolledBackError);
    expect((await loaded()).filter((m) => m.startsWith('nvidia'))).toEqual(['nvidia@580.142', 'nvidia_modeset@580.142', 'nvidia_uvm@580.142']);
  });

  it('an unreadable last good record leaves nothing to roll back to: the load goes on, and a good record replaces it', async () => {
    const file = options().lastGoodFile ?? '';
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, '{"driver": "gpu", "version": 580');
    await reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia());
    expect((await readLastGoodDriver(file))?.version).toBe('580.142');
  });

  it('does not roll back a driver it did not load itself (no matching record): the failure stands', async () => {
    await reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia({ lastGoodFile: join(scratch.dir, 'elsewhere.json') }));
    kernel.failInit('nvidia', 'No such device');
    const attempt = reloadDriver(kernel, anNvidiaDriver('580.200'), nvidia());
    await expect(attempt).rejects.toBeInstanceOf(ModuleLoadError);
    expect((await loaded()).filter((m) => m.startsWith('nvidia'))).toEqual([]);
  });

  it('refuses with FirmwareMissing before unloading when a declared firmware file is nowhere', async () => {
    await reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia());
    const attempt = reloadDriver(kernel, anNvidiaDriver('580.999'), nvidia());
    await expect(attempt).rejects.toBeInstanceOf(FirmwareMissingError);
    await expect(attempt).rejects.toThrow(/^firmware missing: nvidia needs nvidia\/580.999\/gsp_ga10x.bin; nvidia needs nvidia\/580.999\/gsp_tu10x.bin \(looked in .*\); nothing was unloaded$/);
    expect(ops().filter((op) => op.startsWith('rmmod'))).toEqual([]);
  });

  it("installs the driver's own firmware to its host dir, points firmware_class there, and reports the previous path", async () => {
    const source = join(scratch.dir, 'image-firmware');
    await mkdir(join(source, 'nvidia', '580.300'), { recursive: true });
    for (const chip of ['ga10x', 'tu10x']) await writeFile(join(source, 'nvidia', '580.300', `gsp_${chip}.bin`), 'new');
    const classPathFile = join(scratch.dir, 'firmware_class-path');
    await writeFile(classPathFile, '\n');
    const hostDir = join(scratch.dir, 'host-firmware', 'gpu');
    const result = await reloadDriver(kernel, anNvidiaDriver('580.300'), nvidia({ firmware: { sourceDir: source, hostDir, hostRoots: [firmwareDir], classPathFile } }));
    expect(result.firmwarePathBefore).toBe('');
    expect(await readFile(classPathFile, 'utf8')).toBe(hostDir);
    expect(await readFile(join(hostDir, 'nvidia', '580.300', 'gsp_ga10x.bin'), 'utf8')).toBe('new');
  });

  it('refuses with the names of user-holder modules (MOFED storage) unless the policy unloads them', async () => {
    const ofed = { driver: 'ofed', version: '25.10', kernelVersion: KVER, modules: [aModule('ib_core', '25.10', []), aModule('mlx5_ib', '25.10', ['ib_core'])] };
    const ofedTree = { ...scratch.tree, root: join(scratch.dir, 'ofed-root') };
    await reloadDriver(kernel, ofed, options({ tree: ofedTree, loadPlan: LOAD_PLANS.mofed }));
    await kernel.installModules(hostTree, '../kernel', [aModule('nvme_rdma', 'inbox', ['ib_core'])]);
    await kernel.load(hostTree, 'nvme_rdma');
    const next = { ...ofed, version: '25.11', modules: [aModule('ib_core', '25.11', []), aModule('mlx5_ib', '25.11', ['ib_core'])] };
    await expect(reloadDriver(kernel, next, options({ tree: ofedTree, loadPlan: LOAD_PLANS.mofed }))).rejects.toBeInstanceOf(HeldByUserModulesError);
    await expect(reloadDriver(kernel, next, options({ tree: ofedTree, loadPlan: LOAD_PLANS.mofed }))).rejects.toThrow(/^driver is in use: held by nvme_rdma /);
    const allowed = await reloadDriver(kernel, next, options({ tree: ofedTree, loadPlan: LOAD_PLANS.mofed, unloadUserHolders: true }));
    expect(allowed.unloaded).toEqual(['mlx5_ib', 'nvme_rdma', 'ib_core']);
  });

  it("unloads NVIDIA's extra holders (nvidia_fs, gdrdrv ...) with the driver", async () => {
    await reloadDriver(kernel, anNvidiaDriver('580.142'), nvidia());
    await kernel.installModules(hostTree, '../gds', [aModule('nvidia_fs', 'gds', ['nvidia'])]);
    await kernel.load(hostTree, 'nvidia_fs');
    const result = await reloadDriver(kernel, anNvidiaDriver('580.200'), nvidia());
    expect(result.unloaded).toEqual(['nvidia_fs', 'nvidia_modeset', 'nvidia_uvm', 'nvidia']);
  });
});
