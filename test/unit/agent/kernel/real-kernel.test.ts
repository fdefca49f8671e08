import { copyFile, mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuiltDriver } from '../../../../agent/build/built-driver.ts';
import { DriverInUseError, KernelCommandError } from '../../../../agent/kernel/kernel-errors.ts';
import type { KernelPort, ModuleTree } from '../../../../agent/kernel/kernel-port.ts';
import { renderModprobeOptions } from '../../../../agent/kernel/plan/modprobe-config.ts';
import { planUnload } from '../../../../agent/kernel/plan/plan-unload.ts';
import { createRealKernel, parseShowDepends } from '../../../../agent/kernel/real-kernel.ts';
import { reloadDriver } from '../../../../agent/kernel/reload-driver.ts';
import { writeConfigFile } from '../../../../agent/kernel/write-config-file.ts';
import { buildSampleDriver, silentLogger } from '../build/sample-driver.ts';
import { aScratch, writeSysModuleTree, type Scratch } from './fixtures.ts';

// Real depmod and modprobe over a module root built from the sample driver's .ko files (compiled
// for Debian's installed headers). Nothing here loads or unloads a module in the running kernel:
// modprobe runs as --show-depends, or fails before inserting; /sys/module is a fixture tree.
describe('the real kernel adapter over a real module root', () => {
  let scratch: Scratch;
  let built: BuiltDriver;
  let kernel: KernelPort;
  let tree: ModuleTree;

  beforeAll(async () => {
    built = await buildSampleDriver('1.0.0', join((scratch = await aScratch('real-kernel-')).dir, 'cache'), {});
    tree = { ...scratch.tree, kernelVersion: built.kernelVersion };
    kernel = createRealKernel({ sysModuleDir: scratch.sysModuleDir, logger: silentLogger() });
    // An inbox module of the same name, as when MOFED replaces the kernel's mlx5_core.
    const inbox = join(tree.root, 'lib', 'modules', tree.kernelVersion, 'kernel', 'drivers', 'misc');
    await mkdir(inbox, { recursive: true });
    await copyFile(built.modules[0]?.path ?? '', join(inbox, 'drsample_core.ko'));
    await kernel.installModules(tree, 'drsample', built.modules);
  }, 120_000);
  afterAll(async () => {
    await rm(scratch.dir, { recursive: true, force: true });
  });

  it('installModules copies the .ko files under updates/ and depmod records drsample_net -> drsample_core', async () => {
    const moduleDir = join(tree.root, 'lib', 'modules', tree.kernelVersion);
    expect((await readdir(join(moduleDir, 'updates', 'drsample'))).sort()).toEqual(['drsample_core.ko', 'drsample_net.ko']);
    const dep = await readFile(join(moduleDir, 'modules.dep'), 'utf8');
    expect(dep).toContain('updates/drsample/drsample_net.ko: updates/drsample/drsample_core.ko');
  });

  it('modprobe --show-depends gives the load order core before net, ours over the inbox module, with options from the configDir', async () => {
    await writeConfigFile(join(tree.configDir, 'driver-rollout-drsample.conf'), renderModprobeOptions({ drsample_core: { greeting: 'hi there' } }));
    const steps = await kernel.resolveLoadOrder(tree, ['drsample_net']);
    expect(steps.map((s) => s.module)).toEqual(['drsample_core', 'drsample_net']);
    expect(steps[0]?.options).toBe('greeting="hi there"');
    expect(steps[0]?.path).toBe(join(tree.root, 'lib', 'modules', tree.kernelVersion, 'updates', 'drsample', 'drsample_core.ko'));
    const both = await kernel.resolveLoadOrder(tree, ['drsample_core', 'drsample_net']);
    expect(both.map((s) => s.module)).toEqual(['drsample_core', 'drsample_net']);
  });

  it('the unload order computed from holders is the reverse of the load order', async () => {
    const loadOrder = (await kernel.resolveLoadOrder(tree, ['drsample_net'])).map((s) => s.module);
    // What /sys/module shows once modprobe loaded them: net uses core's symbol, so it holds core.
    const sys = join(scratch.dir, 'sys-loaded');
    await writeSysModuleTree(sys, built.modules.map((m) => {
      const holders = built.modules.filter((h) => h.dependsOn.includes(m.name)).map((h) => h.name);
      return { name: m.name, refcnt: holders.length, holders, srcversion: m.srcversion ?? '' };
    }));
    const loaded = createRealKernel({ sysModuleDir: sys, logger: silentLogger() });
    const plan = planUnload(await loaded.listLoaded());
    expect(plan).toEqual({ kind: 'unload', order: [...loadOrder].reverse() });
  });

  it('a module missing from the tree ends in a KernelCommandError quoting modprobe', async () => {
    const empty = { ...tree, root: join(scratch.dir, 'empty-root') };
    await mkdir(join(empty.root, 'lib', 'modules', tree.kernelVersion), { recursive: true });
    const load = kernel.load(empty, 'drsample_core');
    await expect(load).rejects.toBeInstanceOf(KernelCommandError);
    await expect(load).rejects.toThrow(/modprobe .*drsample_core failed \(exit 1\): modprobe: FATAL: Module drsample_core not found in directory/);
    await expect(kernel.resolveLoadOrder(tree, ['drsample_nosuch'])).rejects.toThrow(/Module drsample_nosuch not found/);
  });

  it('reloadDriver refuses "driver is in use" on a fixture /sys/module tree where /dev/drsample is open', async () => {
    const sys = join(scratch.dir, 'sys-in-use');
    await writeSysModuleTree(sys, [
      { name: 'drsample_core', refcnt: 2, holders: ['drsample_net'], srcversion: 'OLDCORE0000000000000000' },
      { name: 'drsample_net', refcnt: 0, srcversion: 'OLDNET00000000000000000' },
    ]);
    const root = { ...tree, root: join(scratch.dir, 'in-use-root') };
    const attempt = reloadDriver(createRealKernel({ sysModuleDir: sys, logger: silentLogger() }), built, { tree: root, logger: silentLogger() });
    await expect(attempt).rejects.toBeInstanceOf(DriverInUseError);
    await expect(attempt).rejects.toThrow('driver is in use: drsample_core (refcnt 2, holders [drsample_net], 1 user(s) outside the kernel)');
    await expect(stat(root.root)).rejects.toThrow(/ENOENT/);
  });

  it('reloadDriver takes the srcversion fast path on a fixture tree showing the built srcversions', async () => {
    const sys = join(scratch.dir, 'sys-current');
    await writeSysModuleTree(sys, [
      { name: 'drsample_core', refcnt: 1, holders: ['drsample_net'], srcversion: built.modules[0]?.srcversion ?? '' },
      { name: 'drsample_net', refcnt: 0, srcversion: built.modules[1]?.srcversion ?? '' },
    ]);
    // Its own modprobe.d: options left by the other tests' loads would be a reason to reload.
    const root = { ...tree, root: join(scratch.dir, 'fast-path-root'), configDir: join(scratch.dir, 'fast-path-modprobe.d') };
    const result = await reloadDriver(createRealKernel({ sysModuleDir: sys, logger: silentLogger() }), built, { tree: root, logger: silentLogger() });
    expect(result.outcome).toBe('fast-path');
    expect(result.modules.map((m) => m.name)).toEqual(['drsample_core', 'drsample_net']);
    await expect(stat(root.root)).rejects.toThrow(/ENOENT/);
  });
});

describe('parseShowDepends', () => {
  it.each([
    ['one module', 'insmod /r/lib/modules/k/extra/a.ko \n', [{ kind: 'insmod', module: 'a', path: '/r/lib/modules/k/extra/a.ko', options: '' }]],
    ['options and compressed files', 'insmod /m/x-y.ko.xz opt=1 b="c d" \n', [{ kind: 'insmod', module: 'x_y', path: '/m/x-y.ko.xz', options: 'opt=1 b="c d"' }]],
    ['builtin lines and repeats', 'builtin crc32c\ninsmod /m/a.ko \ninsmod /m/b.ko \ninsmod /m/a.ko \n', [
      { kind: 'builtin', module: 'crc32c', path: '', options: '' },
      { kind: 'insmod', module: 'a', path: '/m/a.ko', options: '' },
      { kind: 'insmod', module: 'b', path: '/m/b.ko', options: '' },
    ]],
  ])('%s', (_name, stdout, expected) => {
    expect(parseShowDepends(stdout)).toEqual(expected);
  });
});
