import { rm } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DriverInUseError } from '../../../../agent/kernel/kernel-errors.ts';
import { reloadDriver } from '../../../../agent/kernel/reload-driver.ts';
import { SimulatedKernel } from '../../../doubles/simulated-kernel.ts';
import { silentLogger } from '../build/sample-driver.ts';
import { aSampleDriver, aScratch, type Scratch } from '../kernel/fixtures.ts';

// Where reloadDriver calls the unload guard, with the simulated kernel double and a guard that
// only records its calls (the guard itself is tested in unload-guard.test.ts).
describe('reloadDriver with an unload guard (simulated kernel, recording guard)', () => {
  let scratch: Scratch;
  let kernel: SimulatedKernel;
  const calls: string[] = [];
  const guard = {
    stopsHolders: true,
    takeDown: () => { calls.push(`takeDown (loaded: ${kernel.history.filter((e) => e.op === 'rmmod').length} rmmod so far)`); return Promise.resolve(); },
    restore: () => { calls.push('restore'); return Promise.resolve(true); },
  };
  const v1 = aSampleDriver('1.0.0');
  const v2 = aSampleDriver('2.0.0');

  beforeEach(async () => {
    calls.length = 0;
    scratch = await aScratch('reload-guard-');
    kernel = new SimulatedKernel({ sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion, loadDurationMs: () => 1, sleep: async () => {} });
  });
  afterEach(async () => {
    await rm(scratch.dir, { recursive: true, force: true });
  });

  it('takes down right before the unload and restores after the new driver loaded', async () => {
    await reloadDriver(kernel, v1, { tree: scratch.tree, logger: silentLogger() });
    const result = await reloadDriver(kernel, v2, { tree: scratch.tree, logger: silentLogger(), unloadGuard: guard });
    expect(result.outcome).toBe('reloaded');
    expect(calls).toEqual(['takeDown (loaded: 0 rmmod so far)', 'restore']);
  });

  it('takes nothing down when nothing is loaded (first install), and still finishes a recorded restore', async () => {
    const result = await reloadDriver(kernel, v1, { tree: scratch.tree, logger: silentLogger(), unloadGuard: guard });
    expect(result.outcome).toBe('loaded-fresh');
    expect(calls).toEqual(['restore']);
  });

  it('puts back what it took down when the unload refuses (a user holds the driver)', async () => {
    await reloadDriver(kernel, v1, { tree: scratch.tree, logger: silentLogger() });
    const user = await kernel.openDevice('drsample_core');
    const error = await reloadDriver(kernel, v2, { tree: scratch.tree, logger: silentLogger(), unloadGuard: guard }).catch((e: unknown) => e);
    await user.close();
    expect(error).toBeInstanceOf(DriverInUseError);
    expect(calls).toEqual(['takeDown (loaded: 0 rmmod so far)', 'restore']);
    expect(kernel.history.filter((e) => e.op === 'rmmod')).toEqual([]);
  });

  it('without holders to stop, refuses a driver in use before taking anything down', async () => {
    await reloadDriver(kernel, v1, { tree: scratch.tree, logger: silentLogger() });
    const user = await kernel.openDevice('drsample_core');
    const error = await reloadDriver(kernel, v2, { tree: scratch.tree, logger: silentLogger(), unloadGuard: { ...guard, stopsHolders: false } }).catch((e: unknown) => e);
    await user.close();
    expect(error).toBeInstanceOf(DriverInUseError);
    expect(calls).toEqual([]);
  });
});
