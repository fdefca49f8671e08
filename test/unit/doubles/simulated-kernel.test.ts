import { readdir, readlink, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findModulesInUse } from '../../../shared/kmod/find-module-users.ts';
import { readLoadedModule } from '../../../shared/kmod/read-loaded-module.ts';
import { KernelCommandError, ModuleBusyError } from '../../../agent/kernel/kernel-errors.ts';
import { renderModprobeOptions } from '../../../agent/kernel/plan/modprobe-config.ts';
import { SimulatedKernel } from '../../doubles/simulated-kernel.ts';
import { writeConfigFile } from '../../../agent/kernel/write-config-file.ts';
import { aSampleDriver, aScratch, holdOpen, type Scratch } from '../agent/kernel/fixtures.ts';

describe('the simulated kernel', () => {
  let scratch: Scratch;
  let kernel: SimulatedKernel;
  const driver = aSampleDriver('1.0.0');

  beforeEach(async () => {
    scratch = await aScratch('simulated-kernel-');
    kernel = new SimulatedKernel({ sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion });
    await kernel.installModules(scratch.tree, 'drsample', driver.modules);
  });
  afterEach(async () => {
    await rm(scratch.dir, { recursive: true, force: true });
  });

  it('loads dependencies first and writes a /sys/module tree that shared/kmod reads like the real one', async () => {
    await writeConfigFile(join(scratch.tree.configDir, 'x.conf'), renderModprobeOptions({ drsample_core: { greeting: 'hi there' } }));
    await kernel.load(scratch.tree, 'drsample_net');
    expect(kernel.history.filter((e) => e.op === 'insmod').map((e) => e.module)).toEqual(['drsample_core', 'drsample_net']);
    const core = await readLoadedModule(scratch.sysModuleDir, 'drsample_core');
    expect(core).toEqual({
      name: 'drsample_core',
      refcnt: 1,
      holders: ['drsample_net'],
      srcversion: driver.modules[0]?.srcversion,
      version: '1.0.0',
      parameters: { greeting: 'hi there' },
    });
    expect(await readlink(join(scratch.sysModuleDir, 'drsample_core', 'holders', 'drsample_net'))).toBe('../../drsample_net');
    expect((await kernel.listLoaded()).map((m) => m.name)).toEqual(['drsample_core', 'drsample_net']);
  });

  it('ignores options the module does not declare, as the kernel does (the load succeeds)', async () => {
    const declaring = driver.modules.map((m) => ({ ...m, parameters: m.name === 'drsample_core' ? ['greeting'] : [] }));
    await kernel.installModules(scratch.tree, 'drsample', declaring);
    await writeConfigFile(join(scratch.tree.configDir, 'x.conf'), renderModprobeOptions({ drsample_core: { greeting: 'hi', greting: 'typo' } }));
    await kernel.load(scratch.tree, 'drsample_core');
    expect((await kernel.readModule('drsample_core'))?.parameters).toEqual({ greeting: 'hi' });
  });

  it('loading a loaded module is a no-op, as modprobe', async () => {
    await kernel.load(scratch.tree, 'drsample_net');
    await kernel.load(scratch.tree, 'drsample_core');
    expect(kernel.history.filter((e) => e.op === 'insmod')).toHaveLength(2);
  });

  it('refuses to unload a held module (EBUSY) and an open device makes refcnt exceed holders', async () => {
    await kernel.load(scratch.tree, 'drsample_net');
    await expect(kernel.unload('drsample_core')).rejects.toThrow(new ModuleBusyError({ command: 'rmmod drsample_core', exitCode: 1, stderr: 'rmmod: ERROR: Module drsample_core is in use by: drsample_net' }));
    const device = await kernel.openDevice('drsample_core');
    const inUse = findModulesInUse(await kernel.listLoaded());
    expect(inUse).toEqual([{ module: 'drsample_core', refcnt: 2, holders: ['drsample_net'], outsideUsers: 1 }]);
    await kernel.unload('drsample_net');
    await expect(kernel.unload('drsample_core')).rejects.toBeInstanceOf(ModuleBusyError);
    await device.close();
    await kernel.unload('drsample_core');
    expect(await kernel.listLoaded()).toEqual([]);
  });

  it.each([
    ['a module not in the tree', (k: SimulatedKernel, s: Scratch) => k.load(s.tree, 'drsample_nosuch'), /FATAL: Module drsample_nosuch not found in directory/],
    ['a tree for another kernel release', (k: SimulatedKernel, s: Scratch) => k.load({ ...s.tree, kernelVersion: '6.1.0-1-amd64' }, 'drsample_core'), /FATAL: Module drsample_core not found/],
    ['a dependency neither installed nor loaded', async (k: SimulatedKernel, s: Scratch) => {
      await k.installModules(s.tree, 'drsample', driver.modules.slice(1));
      return k.load(s.tree, 'drsample_net');
    }, /could not insert 'drsample_net': Unknown symbol in module/],
    // modprobe names the module it was asked for, not the dependency whose init failed.
    ['a dependency whose init fails', (k: SimulatedKernel, s: Scratch) => { k.failInit('drsample_core', 'No such device'); return k.load(s.tree, 'drsample_net'); }, /could not insert 'drsample_net': No such device/],
    ['unloading a module that is not loaded', (k: SimulatedKernel) => k.unload('drsample_core'), /Module drsample_core is not currently loaded/],
  ])('fails like modprobe/rmmod for %s', async (_name, act, message) => {
    const attempt = act(kernel, scratch);
    await expect(attempt).rejects.toBeInstanceOf(KernelCommandError);
    await expect(attempt).rejects.toThrow(message);
  });

  it('rejects modules installed for another kernel release than the running one (ENOEXEC)', async () => {
    const other = { ...scratch.tree, kernelVersion: '6.1.0-1-amd64' };
    await kernel.installModules(other, 'drsample', driver.modules);
    await expect(kernel.load(other, 'drsample_core')).rejects.toThrow(/could not insert 'drsample_core': Exec format error/);
  });

  it('models load time with the injected sleep', async () => {
    const slept: number[] = [];
    const slow = new SimulatedKernel({
      sysModuleDir: scratch.sysModuleDir,
      runningKernelVersion: scratch.tree.kernelVersion,
      loadDurationMs: (m) => (m === 'drsample_core' ? 3000 : 500),
      sleep: (ms) => { slept.push(ms); return Promise.resolve(); },
    });
    await slow.installModules(scratch.tree, 'drsample', driver.modules);
    await slow.load(scratch.tree, 'drsample_net');
    expect(slept).toEqual([3000, 500]);
  });

  it('with a device dir: a loaded module has a device file, and another process holding it open pins the module (refcnt, EBUSY) until it lets go', async () => {
    const deviceDir = join(scratch.dir, 'dev');
    const stateFile = join(scratch.dir, 'kernel.json');
    const options = { sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion, stateFile, deviceDir };
    const first = new SimulatedKernel(options);
    await first.installModules(scratch.tree, 'drsample', driver.modules);
    await first.load(scratch.tree, 'drsample_net');
    expect((await readdir(deviceDir)).sort()).toEqual(['drsample_core', 'drsample_net']);
    const client = await holdOpen(join(deviceDir, 'drsample_net'));
    try {
      // Another agent process (a new driver pod) sees the client in refcnt and cannot unload.
      const second = new SimulatedKernel(options);
      expect(await second.readModule('drsample_net')).toMatchObject({ refcnt: 1, holders: [] });
      await expect(second.unload('drsample_net')).rejects.toBeInstanceOf(ModuleBusyError);
      client.kill('SIGKILL');
      await new Promise((resolve) => client.once('exit', resolve));
      expect(await second.readModule('drsample_net')).toMatchObject({ refcnt: 0 });
      await second.unload('drsample_net');
      expect((await readdir(deviceDir)).sort()).toEqual(['drsample_core']);
    } finally {
      client.kill('SIGKILL');
    }
  });

  it('outlives the agent with a state file: a new process finds the driver loaded and can unload it, as after a pod restart', async () => {
    const stateFile = join(scratch.dir, 'kernel.json');
    const first = new SimulatedKernel({ sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion, stateFile });
    await first.installModules(scratch.tree, 'drsample', driver.modules);
    await first.load(scratch.tree, 'drsample_net');

    const second = new SimulatedKernel({ sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion, stateFile });
    expect((await second.listLoaded()).map((m) => [m.name, m.holders])).toEqual([['drsample_core', ['drsample_net']], ['drsample_net', []]]);
    await expect(second.unload('drsample_core')).rejects.toBeInstanceOf(ModuleBusyError);
    await second.unload('drsample_net');
    await second.unload('drsample_core');

    const third = new SimulatedKernel({ sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion, stateFile });
    expect(await third.listLoaded()).toEqual([]);
    await third.load(scratch.tree, 'drsample_net'); // the installed tree is remembered too
    expect(await readLoadedModule(scratch.sysModuleDir, 'drsample_core')).toMatchObject({ refcnt: 1, holders: ['drsample_net'] });
  });

  it('shared by the agents of two drivers on a node (one state file): a module of one that uses the other\'s symbols holds it, and the other cannot unload it (EBUSY) until it goes', async () => {
    const stateFile = join(scratch.dir, 'kernel.json');
    const options = { sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion, stateFile };
    const [core, net] = driver.modules;
    if (core === undefined || net === undefined) throw new Error('the sample driver has two modules');
    // ofed's agent (ib_core's part) and gpu's agent (peermem's part), both started before either loads.
    const ofed = new SimulatedKernel(options);
    const gpu = new SimulatedKernel(options);
    await Promise.all([ofed.installModules(scratch.tree, 'ofed', [core]), gpu.installModules(scratch.tree, 'gpu', [net])]);
    await ofed.load(scratch.tree, 'drsample_core');
    await gpu.load(scratch.tree, 'drsample_net');
    expect(gpu.history.filter((e) => e.op === 'insmod').map((e) => e.module)).toEqual(['drsample_net']);
    expect(await ofed.readModule('drsample_core')).toMatchObject({ refcnt: 1, holders: ['drsample_net'] });
    await expect(ofed.unload('drsample_core')).rejects.toThrow('rmmod: ERROR: Module drsample_core is in use by: drsample_net');
    await gpu.unload('drsample_net');
    await ofed.unload('drsample_core');
    expect(await new SimulatedKernel(options).listLoaded()).toEqual([]);
  });
});
