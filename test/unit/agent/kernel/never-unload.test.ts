import { rm } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { describeFailure } from '../../../../agent/describe-failure.ts';
import { NeverUnloadError } from '../../../../agent/kernel/kernel-errors.ts';
import { reloadDriver } from '../../../../agent/kernel/reload-driver.ts';
import { SimulatedKernel } from '../../../doubles/simulated-kernel.ts';
import { silentLogger } from '../build/sample-driver.ts';
import { aSampleDriver, aScratch, type Scratch } from './fixtures.ts';

// The never-unload policy (--never-unload) with the simulated kernel double: a reload that would
// unload a listed module is refused before anything changes, with reason RebootRequired.
describe('reloadDriver with never-unload modules (simulated kernel)', () => {
  let scratch: Scratch;
  let kernel: SimulatedKernel;
  const v1 = aSampleDriver('1.0.0');
  const v2 = aSampleDriver('2.0.0');

  beforeEach(async () => {
    scratch = await aScratch('never-unload-');
    kernel = new SimulatedKernel({ sysModuleDir: scratch.sysModuleDir, runningKernelVersion: scratch.tree.kernelVersion, loadDurationMs: () => 1, sleep: async () => {} });
  });
  afterEach(async () => {
    await rm(scratch.dir, { recursive: true, force: true });
  });

  it.each([
    { name: 'a listed module that a new version would unload', neverUnload: ['drsample_core'], refused: ['drsample_core'] },
    { name: 'the modprobe spelling (dash) of a listed module', neverUnload: ['drsample-net'], refused: ['drsample_net'] },
    { name: 'both modules, named in order', neverUnload: ['drsample_net', 'drsample_core'], refused: ['drsample_core', 'drsample_net'] },
  ])('refuses $name: nothing unloaded, reason RebootRequired, message says a reboot is needed', async ({ neverUnload, refused }) => {
    await reloadDriver(kernel, v1, { tree: scratch.tree, logger: silentLogger() });
    const historyBefore = [...kernel.history];

    const error = await reloadDriver(kernel, v2, { tree: scratch.tree, logger: silentLogger(), neverUnload }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(NeverUnloadError);
    expect((error as NeverUnloadError).modules).toEqual(refused);
    expect(kernel.history).toEqual(historyBefore);
    const loaded = await Promise.all(v1.modules.map((m) => kernel.readModule(m.name)));
    expect(loaded.map((m) => m?.srcversion)).toEqual(v1.modules.map((m) => m.srcversion));
    const shown = describeFailure('load', error);
    expect(shown.reason).toBe('RebootRequired');
    expect(shown.message).toBe(
      `Failed: reboot required: ${refused.join(', ')} ${refused.length === 1 ? 'is' : 'are'} set never to unload (--never-unload), so drsample 2.0.0 can load only after a reboot; nothing was unloaded`,
    );
  });

  it.each([
    { name: 'nothing is loaded yet (loaded-fresh)', first: undefined, neverUnload: ['drsample_core'], outcome: 'loaded-fresh' },
    { name: 'the built driver is already loaded (fast path)', first: v2, neverUnload: ['drsample_core'], outcome: 'fast-path' },
    { name: 'the listed module is not one of the driver', first: v1, neverUnload: ['nvidia_peermem'], outcome: 'reloaded' },
  ] as const)('does not refuse when $name', async ({ first, neverUnload, outcome }) => {
    if (first !== undefined) await reloadDriver(kernel, first, { tree: scratch.tree, logger: silentLogger() });
    const result = await reloadDriver(kernel, v2, { tree: scratch.tree, logger: silentLogger(), neverUnload });
    expect(result.outcome).toBe(outcome);
  });
});
