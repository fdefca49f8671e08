import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pathExists } from '../../../../shared/fs/if-exists.ts';
import { DriverInUseError, DriverVerificationError, ModuleDependencyError, ModuleLoadError } from '../../../../agent/kernel/kernel-errors.ts';
import type { KernelPort, ModuleFile } from '../../../../agent/kernel/kernel-port.ts';
import { reloadDriver, type ReloadDriverOptions } from '../../../../agent/kernel/reload-driver.ts';
import { SimulatedKernel } from '../../../doubles/simulated-kernel.ts';
import { silentLogger } from '../build/sample-driver.ts';
import { aSampleDriver, aScratch, fakeSrcversion, holdOpen, type Scratch } from './fixtures.ts';

// The reload logic with the simulated kernel (no kernel to load modules into here; the real
// adapter's side is covered by real-kernel.test.ts and, in a VM, by test/kernel).
describe('reloadDriver with the simulated kernel', () => {
  let scratch: Scratch;
  let kernel: SimulatedKernel;
  let blacklistSeenDuringLoad: boolean[];
  const v1 = aSampleDriver('1.0.0');
  const v2 = aSampleDriver('2.0.0');
  const options = (extra: Partial<ReloadDriverOptions> = {}): ReloadDriverOptions => ({ tree: scratch.tree, logger: silentLogger(), ...extra });
  const blacklistFile = (): string => join(scratch.tree.configDir, 'driver-rollout-drsample-blacklist.conf');
  const ops = (): string[] => kernel.history.filter((e) => e.op !== 'depmod').map((e) => `${e.op} ${e.module}`);

  beforeEach(async () => {
    scratch = await aScratch('reload-driver-');
    blacklistSeenDuringLoad = [];
    kernel = new SimulatedKernel({
      sysModuleDir: scratch.sysModuleDir,
      runningKernelVersion: scratch.tree.kernelVersion,
      loadDurationMs: () => 1,
      sleep: async () => {
        blacklistSeenDuringLoad.push(await pathExists(blacklistFile()));
      },
    });
  });
  afterEach(async () => {
    await rm(scratch.dir, { recursive: true, force: true });
  });

  it('loads a driver that is not loaded (loaded-fresh), core before net, with parameters from modprobe.d', async () => {
    const result = await reloadDriver(kernel, v1, options({ parameters: { drsample_core: { greeting: 'hi there' } } }));
    expect(result.outcome).toBe('loaded-fresh');
    expect(result.unloaded).toEqual([]);
    expect(result.loadOrder.map((s) => s.module)).toEqual(['drsample_core', 'drsample_net']);
    expect(ops()).toEqual(['insmod drsample_core', 'insmod drsample_net']);
    expect(result.modules.map((m) => [m.name, m.srcversion])).toEqual(v1.modules.map((m) => [m.name, m.srcversion]));
    expect(result.modules[0]?.parameters).toEqual({ greeting: 'hi there' });
    expect(await readFile(join(scratch.tree.configDir, 'driver-rollout-drsample.conf'), 'utf8')).toContain('options drsample_core greeting="hi there"');
  });

  it('skips the reload when the loaded srcversions equal the built ones (fast path)', async () => {
    await reloadDriver(kernel, v1, options());
    const before = kernel.history.length;
    const result = await reloadDriver(kernel, v1, options());
    expect(result.outcome).toBe('fast-path');
    expect(kernel.history).toHaveLength(before);
  });

  it('reloads a new version: unloads holders first (the reverse of the load order), loads and verifies', async () => {
    await reloadDriver(kernel, v1, options());
    const result = await reloadDriver(kernel, v2, options());
    expect(result.outcome).toBe('reloaded');
    expect(result.reason).toContain(`drsample_core srcversion ${fakeSrcversion('drsample_core', '1.0.0')} is loaded`);
    expect(result.unloaded).toEqual(['drsample_net', 'drsample_core']);
    expect(ops().slice(2)).toEqual(['rmmod drsample_net', 'rmmod drsample_core', 'insmod drsample_core', 'insmod drsample_net']);
    expect(result.modules.map((m) => m.srcversion)).toEqual(v2.modules.map((m) => m.srcversion));
  });

  it('reloads when a configured parameter differs from the loaded one', async () => {
    await reloadDriver(kernel, v1, options({ parameters: { drsample_core: { greeting: 'hello' } } }));
    const result = await reloadDriver(kernel, v1, options({ parameters: { drsample_core: { greeting: 'bonjour' } } }));
    expect(result.outcome).toBe('reloaded');
    expect(result.reason).toBe('drsample_core parameter greeting is hello, configured bonjour');
    expect(result.modules[0]?.parameters).toEqual({ greeting: 'bonjour' });
  });

  it('reloads when a parameter is dropped from config: /sys/module keeps the old value, the options file tells', async () => {
    await reloadDriver(kernel, v1, options({ parameters: { drsample_core: { greeting: 'bonjour' } } }));
    const result = await reloadDriver(kernel, v1, options());
    expect(result).toMatchObject({ outcome: 'reloaded', reason: 'module options changed since the last load' });
    expect(result.modules[0]?.parameters).toEqual({});
    const again = await reloadDriver(kernel, v1, options());
    expect(again.outcome).toBe('fast-path');
  });

  it('refuses with "driver is in use" when a process holds /dev/drsample open, and unloads nothing', async () => {
    await reloadDriver(kernel, v1, options());
    const device = await kernel.openDevice('drsample_core');
    const attempt = reloadDriver(kernel, v2, options());
    await expect(attempt).rejects.toBeInstanceOf(DriverInUseError);
    await expect(attempt).rejects.toThrow('driver is in use: drsample_core (refcnt 2, holders [drsample_net], 1 user(s) outside the kernel)');
    expect(ops().filter((op) => op.startsWith('rmmod'))).toEqual([]);
    expect((await kernel.readModule('drsample_core'))?.srcversion).toBe(v1.modules[0]?.srcversion);
    await device.close();
    expect((await reloadDriver(kernel, v2, options())).outcome).toBe('reloaded');
  });

  it('names the processes holding the device files when asked (real /proc)', async () => {
    await reloadDriver(kernel, v1, options());
    const device = await kernel.openDevice('drsample_core');
    // The simulated /dev/drsample is a file of the scratch dir, held by a real process.
    const deviceFile = join(scratch.dir, 'drsample');
    await writeFile(deviceFile, '');
    const holder = await holdOpen(deviceFile);
    try {
      const attempt = reloadDriver(kernel, v2, options({ deviceUsers: { devicePrefixes: [deviceFile] } }));
      await expect(attempt).rejects.toThrow(`; open by pid ${holder.pid} (sleep) has ${deviceFile} open`);
    } finally {
      holder.kill();
      await device.close();
    }
  });

  it('counts a holder that is not being unloaded as a user', async () => {
    const rdma: ModuleFile = { name: 'other_rdma', path: '/x/other_rdma.ko', srcversion: undefined, version: undefined, dependsOn: ['drsample_core'] };
    await kernel.installModules(scratch.tree, 'other', [rdma]);
    await reloadDriver(kernel, v1, options());
    await kernel.load(scratch.tree, 'other_rdma');
    await expect(reloadDriver(kernel, v2, options())).rejects.toThrow('driver is in use: drsample_core (refcnt 2, holders [drsample_net, other_rdma], 1 user(s) outside the kernel)');
    expect((await reloadDriver(kernel, v2, options({ alsoUnload: ['other_rdma'] }))).unloaded).toEqual(['drsample_net', 'other_rdma', 'drsample_core']);
  });

  it('unloads a loaded competing module and blacklists it only during the reload', async () => {
    await kernel.installModules(scratch.tree, 'inbox', [{ name: 'drsample_inbox', path: '/x/drsample_inbox.ko', srcversion: undefined, version: undefined, dependsOn: [] }]);
    await kernel.load(scratch.tree, 'drsample_inbox');
    const result = await reloadDriver(kernel, v1, options({ competingModules: ['drsample_inbox'] }));
    expect(result.outcome).toBe('reloaded');
    expect(result.unloaded).toEqual(['drsample_inbox']);
    expect(blacklistSeenDuringLoad.slice(1)).toEqual([true, true]);
    expect(await pathExists(blacklistFile())).toBe(false);
  });

  it('removes a blacklist an agent killed mid-reload left behind, also when the driver is already loaded (fast path)', async () => {
    await reloadDriver(kernel, v1, options({ competingModules: ['nouveau'] }));
    await writeFile(blacklistFile(), 'blacklist nouveau\n');
    const result = await reloadDriver(kernel, v1, options({ competingModules: ['nouveau'] }));
    expect(result.outcome).toBe('fast-path');
    expect(await pathExists(blacklistFile())).toBe(false);
  });

  it('a failing modprobe ends in a ModuleLoadError naming the module and the reason, unloads what did load, and removes the blacklist', async () => {
    kernel.failInit('drsample_net', 'No such device');
    const attempt = reloadDriver(kernel, v1, options({ competingModules: ['nouveau'] }));
    await expect(attempt).rejects.toBeInstanceOf(ModuleLoadError);
    await expect(attempt).rejects.toThrow("drsample_net failed to load: could not insert 'drsample_net': No such device; no driver module left loaded");
    expect(ops()).toEqual(['insmod drsample_core', 'rmmod drsample_core']);
    expect(await pathExists(blacklistFile())).toBe(false);
  });

  it('a dependency that is neither in the tree nor staying loaded is refused before anything is unloaded', async () => {
    await reloadDriver(kernel, v1, options());
    const [core, net] = v2.modules as [ModuleFile, ModuleFile];
    const broken = { ...v2, modules: [core, { ...net, dependsOn: ['drsample_core', 'drsample_missing'] }] };
    const attempt = reloadDriver(kernel, broken, options());
    await expect(attempt).rejects.toBeInstanceOf(ModuleDependencyError);
    await expect(attempt).rejects.toThrow(
      "the host's module tree cannot provide the driver's inbox dependencies (drsample_missing); nothing was unloaded",
    );
    expect(ops().filter((op) => op.startsWith('rmmod'))).toEqual([]);
  });

  it('fails verification when what modprobe loaded is not what was built (a tree with stale files)', async () => {
    // A port that installs version 1's files whatever it is given: the kernel then runs stale modules.
    const staleTree: KernelPort = {
      readModule: (name) => kernel.readModule(name),
      listLoaded: () => kernel.listLoaded(),
      installModules: (tree, subdir) => kernel.installModules(tree, subdir, v1.modules),
      resolveLoadOrder: (tree, modules) => kernel.resolveLoadOrder(tree, modules),
      load: (tree, module) => kernel.load(tree, module),
      unload: (module) => kernel.unload(module),
    };
    const attempt = reloadDriver(staleTree, v2, options());
    await expect(attempt).rejects.toBeInstanceOf(DriverVerificationError);
    await expect(attempt).rejects.toThrow(
      `driver loaded but not verified: drsample_core srcversion is ${fakeSrcversion('drsample_core', '1.0.0')}, built ${fakeSrcversion('drsample_core', '2.0.0')}; ` +
        `drsample_net srcversion is ${fakeSrcversion('drsample_net', '1.0.0')}, built ${fakeSrcversion('drsample_net', '2.0.0')}`,
    );
  });

  it('refuses modules built for another kernel than the tree', async () => {
    await expect(reloadDriver(kernel, aSampleDriver('1.0.0', '6.1.0-1-amd64'), options())).rejects.toThrow(/built for 6\.1\.0-1-amd64 cannot be loaded from a tree for 6\.1\.0-56-amd64/);
  });
});
