import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { BuiltDriver } from '../../agent/build/built-driver.ts';
import type { ModuleTree } from '../../agent/kernel/kernel-port.ts';
import type { ModuleParameters } from '../../agent/kernel/plan/modprobe-config.ts';
import { SimulatedKernel } from '../doubles/simulated-kernel.ts';
import { buildSampleDriver, silentLogger } from '../unit/agent/build/sample-driver.ts';
import { runScenario, type ScenarioStep, type StepReport } from './guest/scenario.ts';
import { bootGuest, type Guest } from './harness/boot-guest.ts';
import { defaultCacheDir } from './harness/build-initramfs.ts';
import { runAgentSteps, stepAt } from './harness/run-agent-steps.ts';
import { GUEST_NODE_COMPILE_CACHE } from './harness/run-guest-scenario.ts';
import { simulatedWorld } from './harness/simulated-world.ts';

/*
 * The agent's reloadDriver with its REAL kernel adapter (modprobe, rmmod, depmod, /sys/module)
 * against Debian's kernel booted under QEMU. The sample driver (test/fixtures/sample-driver) is
 * compiled on the host with the agent's buildDriver (real kbuild, its module cache kept in
 * ~/.cache so reruns skip the compile); the guest reads it through the host share.
 * One guest serves every scenario; each starts with the sample modules unloaded and its own
 * module root and modprobe.d directory in the guest's /run (tmpfs).
 */

const CORE = 'drsample_core';
const NET = 'drsample_net';
/** test/kernel/fixtures/inbox-dependent-driver: one module that needs the kernel's own crc8. */
const CRC = 'drsample_crc';
const INBOX_DEPENDENT_DRIVER = join(import.meta.dirname, 'fixtures', 'inbox-dependent-driver');
const DEVICE = '/dev/drsample';

let guest: Guest;
let v1: BuiltDriver;
let v2: BuiltDriver;
let crcDriver: BuiltDriver;

beforeAll(async () => {
  const cacheDir = join(defaultCacheDir(), 'kernel-test-modules');
  const started = performance.now();
  // Built before the boot: the guest caches the host's directory entries (9p cache=loose), so
  // files the host adds under a directory the guest has already read may stay invisible to it.
  v1 = await buildSampleDriver('1.0.0', cacheDir);
  v2 = await buildSampleDriver('2.0.0', cacheDir);
  crcDriver = await buildSampleDriver('1.0.0', cacheDir, { driver: CRC, source: { kind: 'directory', path: INBOX_DEPENDENT_DRIVER }, generatedFiles: {} });
  guest = await bootGuest({ writableDirs: [GUEST_NODE_COMPILE_CACHE] });
  console.info(
    `kernel tests: ${guest.kernel.version} booted in ${Math.round(guest.bootMs)} ms; sample driver 1.0.0 ${describeBuild(v1)}, 2.0.0 ${describeBuild(v2)}; ready after ${Math.round(performance.now() - started)} ms`,
  );
});

afterAll(async () => {
  await guest.stop();
});

beforeEach(async () => {
  const reset = await guest.run(`for m in ${CRC} ${NET} ${CORE}; do if [ -e /sys/module/$m ]; then rmmod $m || exit 1; fi; done`);
  expect(reset.exitCode, reset.stderr).toBe(0);
});

let treeCount = 0;

/** A module root and modprobe.d directory of the guest's own, fresh for each scenario. */
function freshTree(): ModuleTree {
  const dir = `/run/driver-rollout-kernel-test/${++treeCount}`;
  return { root: `${dir}/root`, kernelVersion: guest.kernel.version, configDir: `${dir}/modprobe.d` };
}

function reload(built: BuiltDriver, tree: ModuleTree, parameters: ModuleParameters = {}): Extract<ScenarioStep, { kind: 'reload' }> {
  return { kind: 'reload', built, tree, parameters };
}

/** Runs the steps in the guest; a reload error other than `expectedErrors` fails with the agent's log. */
function runInGuest(
  name: string,
  steps: readonly ScenarioStep[],
  expectedErrors: readonly string[] = [],
  watch: readonly string[] = [CORE, NET],
): Promise<readonly StepReport[]> {
  return runAgentSteps(guest, name, { steps, watch }, { expectedErrors });
}

/** The sample modules' own init/exit messages, in the order the kernel logged them. */
function moduleEvents(s: StepReport): string[] {
  return s.kernelLog.filter((line) => /drsample_\w+ \S+ (loaded|unloaded)/.test(line)).map((line) => line.replace(/;.*$/, '').replace(/ \(.*$/, '').trim());
}

function srcversions(built: BuiltDriver): Record<string, string | undefined> {
  return Object.fromEntries(built.modules.map((m) => [m.name, m.srcversion]));
}

function loadedSrcversions(s: StepReport): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(s.after).map(([name, m]) => [name, m?.srcversion]));
}

/** What both kernels must agree on: the agent's outcome or error, and /sys/module afterwards. */
function comparable(s: StepReport): unknown {
  return {
    kind: s.kind,
    unloaded: s.unloaded,
    outcome: s.result === undefined ? undefined : { outcome: s.result.outcome, reason: s.result.reason, unloaded: s.result.unloaded },
    loadOrder: s.result?.loadOrder.map((l) => `${l.module} ${l.options}`),
    error: s.error === undefined ? undefined : `${s.error.name}: ${s.error.message}`,
    openError: s.openError,
    after: Object.fromEntries(
      Object.entries(s.after).map(([name, m]) => [name, m === null ? null : { refcnt: m.refcnt, holders: m.holders, srcversion: m.srcversion, version: m.version, parameters: m.parameters }]),
    ),
  };
}

function describeBuild(built: BuiltDriver): string {
  return built.cacheHit ? 'from the module cache' : `compiled in ${built.durationMs} ms`;
}

describe("the agent's real kernel adapter on Debian's kernel under QEMU", () => {
  it('loads the two-module driver fresh through depmod and modprobe, with parameters from config', async () => {
    const tree = freshTree();
    const greeting = 'hello from the config';
    const steps = await runInGuest('fresh load', [
      reload(v1, tree, { [CORE]: { greeting } }),
      { kind: 'open-device', device: DEVICE },
    ]);
    const load = stepAt(steps, 0);
    expect(load.result?.outcome).toBe('loaded-fresh');
    expect(load.result?.unloaded).toEqual([]);
    expect(load.result?.loadOrder.map((s) => s.module)).toEqual([CORE, NET]);
    expect(load.result?.loadOrder.every((s) => s.path.startsWith(`${tree.root}/lib/modules/${tree.kernelVersion}/`))).toBe(true);
    // What the kernel says, not what the agent says:
    expect(loadedSrcversions(load)).toEqual(srcversions(v1));
    expect(load.after[CORE]).toMatchObject({ version: '1.0.0', refcnt: 1, holders: [NET], parameters: { greeting } });
    expect(load.after[NET]).toMatchObject({ version: '1.0.0', refcnt: 0, holders: [] });
    expect(moduleEvents(load)).toEqual([`${CORE} 1.0.0 loaded`, `${NET} 1.0.0 loaded`]);
    expect(load.kernelLog).toContainEqual(expect.stringContaining(`core says ${greeting}`));
    expect(stepAt(steps, 1).openError).toBeUndefined();
  });

  it('upgrades version 1 to version 2, unloading holders first, and version 2 is what runs', async () => {
    const tree = freshTree();
    const steps = await runInGuest('upgrade', [reload(v1, tree), reload(v2, tree)]);
    expect(srcversions(v2)).not.toEqual(srcversions(v1));
    expect(loadedSrcversions(stepAt(steps, 0))).toEqual(srcversions(v1));
    const upgrade = stepAt(steps, 1);
    expect(upgrade.result?.outcome).toBe('reloaded');
    expect(upgrade.result?.unloaded).toEqual([NET, CORE]);
    expect(moduleEvents(upgrade)).toEqual([`${NET} 1.0.0 unloaded`, `${CORE} 1.0.0 unloaded`, `${CORE} 2.0.0 loaded`, `${NET} 2.0.0 loaded`]);
    expect(loadedSrcversions(upgrade)).toEqual(srcversions(v2));
    expect(upgrade.after[CORE]).toMatchObject({ version: '2.0.0', holders: [NET] });
  });

  it('refuses while a process holds the device open, changes nothing, and succeeds once it exits', async () => {
    const tree = freshTree();
    const steps = await runInGuest('driver in use', [
      reload(v1, tree),
      { kind: 'hold-device', device: DEVICE },
      { ...reload(v2, tree), deviceUsers: { devicePrefixes: [DEVICE] } },
      { kind: 'open-device', device: DEVICE },
      { kind: 'unload-module', module: CORE },
      { kind: 'release-device' },
      reload(v2, tree),
    ], ['DriverInUseError', 'ModuleBusyError']);
    const held = stepAt(steps, 1);
    expect(held.after[CORE]).toMatchObject({ refcnt: 2, holders: [NET] });

    const refused = stepAt(steps, 2);
    expect(refused.result).toBeUndefined();
    expect(refused.error?.name).toBe('DriverInUseError');
    // The module and the reason from /sys/module, and the process from the guest's real /proc.
    expect(refused.error?.message).toBe(
      `driver is in use: drsample_core (refcnt 2, holders [drsample_net], 1 user(s) outside the kernel); open by pid ${held.holderPid} (sleep) has /dev/drsample open`,
    );
    expect(refused.error?.fields).toMatchObject({
      driver: 'drsample',
      inUse: [{ module: CORE, refcnt: 2, holders: [NET], outsideUsers: 1 }],
      deviceUsers: [{ pid: held.holderPid, command: 'sleep', files: [DEVICE] }],
    });
    expect(moduleEvents(refused)).toEqual([]);
    expect(loadedSrcversions(refused)).toEqual(srcversions(v1));

    const stillWorking = stepAt(steps, 3);
    expect(stillWorking.openError).toBeUndefined();
    expect(stillWorking.after[CORE]).toMatchObject({ version: '1.0.0', refcnt: 2 });

    // Should a user appear after the agent's check, the kernel (via rmmod) refuses on its own,
    // and the adapter says so with its own error class.
    const rmmod = stepAt(steps, 4);
    expect(rmmod.error?.name).toBe('ModuleBusyError');
    expect(rmmod.error?.message).toMatch(/^rmmod drsample_core failed \(exit 1\): rmmod: ERROR: Module drsample_core is in use/);
    expect(loadedSrcversions(rmmod)).toEqual(srcversions(v1));

    expect(stepAt(steps, 5).after[CORE]).toMatchObject({ refcnt: 1, holders: [NET] });
    const retry = stepAt(steps, 6);
    expect(retry.result?.outcome).toBe('reloaded');
    expect(moduleEvents(retry)).toEqual([`${NET} 1.0.0 unloaded`, `${CORE} 1.0.0 unloaded`, `${CORE} 2.0.0 loaded`, `${NET} 2.0.0 loaded`]);
    expect(loadedSrcversions(retry)).toEqual(srcversions(v2));
  });

  it('takes the srcversion fast path when the same version is loaded: no unload, no load', async () => {
    const tree = freshTree();
    const steps = await runInGuest('fast path', [
      reload(v1, tree, { [CORE]: { greeting: 'first' } }),
      reload(v1, tree, { [CORE]: { greeting: 'first' } }),
      reload(v1, tree, { [CORE]: { greeting: 'second' } }),
      reload(v1, tree),
    ]);
    const again = stepAt(steps, 1);
    expect(again.result).toMatchObject({ outcome: 'fast-path', unloaded: [], loadOrder: [] });
    expect(moduleEvents(again)).toEqual([]);
    expect(loadedSrcversions(again)).toEqual(srcversions(v1));
    expect(again.after).toEqual(stepAt(steps, 0).after);
    // Same srcversion, other parameters: not the fast path, the kernel must see the new value.
    const reconfigured = stepAt(steps, 2);
    expect(reconfigured.result?.outcome).toBe('reloaded');
    expect(moduleEvents(reconfigured)).toEqual([`${NET} 1.0.0 unloaded`, `${CORE} 1.0.0 unloaded`, `${CORE} 1.0.0 loaded`, `${NET} 1.0.0 loaded`]);
    expect(reconfigured.after[CORE]?.parameters).toEqual({ greeting: 'second' });
    // The parameter dropped from config: sysfs alone cannot tell (it shows the old value), the
    // options file of the last load can; the reload brings back the module's default.
    const dropped = stepAt(steps, 3);
    expect(dropped.result).toMatchObject({ outcome: 'reloaded', reason: 'module options changed since the last load' });
    expect(dropped.after[CORE]?.parameters).toEqual({ greeting: 'hello' });
  });

  // The kernel loads a module given a parameter it does not declare ("unknown parameter 'greting'
  // ignored") and modprobe exits 0: only the agent can catch a misspelt option, before it unloads.
  it('refuses a parameter the module does not declare before unloading anything', async () => {
    const tree = freshTree();
    const steps = await runInGuest(
      'undeclared parameter',
      [reload(v1, tree, { [CORE]: { greeting: 'configured' } }), reload(v2, tree, { [CORE]: { greting: 'misspelt' } })],
      ['ConfigError'],
    );
    const refused = stepAt(steps, 1);
    expect(refused.error?.name).toBe('ConfigError');
    expect(refused.error?.message).toContain('parameters.drsample_core.greting: drsample_core has no parameter greting (it declares greeting)');
    expect(moduleEvents(refused)).toEqual([]);
    expect(loadedSrcversions(refused)).toEqual(srcversions(v1));
    expect(refused.after[CORE]?.parameters).toEqual({ greeting: 'configured' });
  });

  // Real drivers need modules of the kernel itself (mlx5_core: mlxfw, psample, tls...). A module
  // root holding only the driver cannot give modprobe those: depmod leaves the symbol unresolved.
  it("loads a driver's inbox dependency from the host's tree (never copying it), and refuses before unloading when that tree lacks it", async () => {
    const unloadCrc8 = await guest.run('if [ -e /sys/module/crc8 ]; then rmmod crc8; fi');
    expect(unloadCrc8.exitCode, unloadCrc8.stderr).toBe(0);
    const tree = freshTree();
    // A host tree without crc8 (an empty one): modprobe cannot resolve it there.
    const emptyHost = { ...tree, root: `${tree.root}-empty-host` };
    const missing = stepAt(await runInGuest('inbox dependency missing from the host tree', [{ ...reload(crcDriver, tree), more: { hostTree: emptyHost } }], ['ModuleDependencyError'], [CRC, 'crc8']), 0);
    expect(missing.error?.name).toBe('ModuleDependencyError');
    expect(missing.error?.message).toBe("the host's module tree cannot provide the driver's inbox dependencies (crc8); nothing was unloaded");
    expect(missing.after).toEqual({ [CRC]: null, crc8: null });

    // The distribution's crc8, from the kernel's own /lib/modules (the default host tree).
    const loaded = stepAt(await runInGuest('inbox dependency from the host tree', [reload(crcDriver, tree)], [], [CRC, 'crc8']), 0);
    expect(loaded.result?.outcome).toBe('loaded-fresh');
    expect(loaded.result?.preloaded).toEqual(['crc8']);
    expect(loaded.after[CRC]).toMatchObject({ version: '1.0.0', srcversion: crcDriver.modules[0]?.srcversion });
    expect(loaded.after.crc8).toMatchObject({ refcnt: 1, holders: [CRC] });
    expect(loaded.kernelLog).toContainEqual(expect.stringContaining('drsample_crc loaded (table[1]=0x07)'));
  });

  // modprobe passes a value as written; /sys/module shows it as the kernel stores it.
  it("takes the fast path when /sys/module shows the configured values in the kernel's spelling (0x31 as 49, yes as Y)", async () => {
    const loadCrc8 = await guest.run('modprobe crc8');
    expect(loadCrc8.exitCode, loadCrc8.stderr).toBe(0);
    const tree = freshTree();
    const parameters = { [CRC]: { polynomial: '0x31', verbose: 'yes' } };
    const steps = await runInGuest('parameter spelling', [reload(crcDriver, tree, parameters), reload(crcDriver, tree, parameters)], [], [CRC]);
    const first = stepAt(steps, 0);
    expect(first.after[CRC]?.parameters).toEqual({ polynomial: '49', verbose: 'Y' });
    expect(first.kernelLog).toContainEqual(expect.stringContaining('drsample_crc loaded (table[1]=0x31, verbose)'));
    expect(stepAt(steps, 1).result).toMatchObject({ outcome: 'fast-path', unloaded: [] });
  });

  it('unloads a competing inbox module before loading, and unloads the driver holders first on stop', async () => {
    // dummy (drivers/net/dummy.ko) stands for nouveau: an inbox module that would take the device.
    const loadDummy = await guest.run('modprobe dummy');
    expect(loadDummy.exitCode, loadDummy.stderr).toBe(0);
    const tree = freshTree();
    const steps = await runInGuest(
      'competing module and unload on stop',
      [{ ...reload(v1, tree), competingModules: ['dummy'] }, { kind: 'unload-driver', driver: 'drsample', modules: [CORE, NET] }],
      [],
      [CORE, NET, 'dummy'],
    );
    const load = stepAt(steps, 0);
    expect(load.result?.unloaded).toEqual(['dummy']);
    expect(load.after).toMatchObject({ dummy: null, [CORE]: { version: '1.0.0' }, [NET]: { version: '1.0.0' } });
    const configFiles = await guest.run(`ls ${tree.configDir}`);
    expect(configFiles.stdout.split('\n').filter((f) => f !== '')).toEqual(['driver-rollout-drsample.conf']);

    const stop = stepAt(steps, 1);
    expect(stop.unloaded).toEqual([NET, CORE]);
    expect(moduleEvents(stop)).toEqual([`${NET} 1.0.0 unloaded`, `${CORE} 1.0.0 unloaded`]);
    expect(stop.after).toEqual({ [CORE]: null, [NET]: null, dummy: null });
  });

  // The unit and integration tests, and the demo, run the agent on the simulated kernel; it is
  // only worth what it shares with the real one. The same steps on both must read the same.
  it('the simulated kernel agrees with the real one, step by step', async () => {
    const steps = (tree: ModuleTree): ScenarioStep[] => [
      reload(v1, tree, { [CORE]: { greeting: 'one' } }),
      reload(v1, tree, { [CORE]: { greeting: 'one' } }),
      reload(v2, tree, { [CORE]: { greeting: 'two words' } }),
      { kind: 'unload-module', module: CORE },
      { kind: 'hold-device', device: DEVICE },
      { kind: 'unload-module', module: NET },
      { kind: 'unload-module', module: CORE },
      reload(v1, tree),
      { kind: 'release-device' },
      reload(v1, tree, { [CORE]: { greting: 'misspelt' } }),
      { kind: 'unload-module', module: CORE },
      { kind: 'open-device', device: DEVICE },
      { kind: 'unload-module', module: NET },
      reload(v1, tree, { [CORE]: { greeting: 'one' } }),
      { kind: 'hold-device', device: DEVICE },
      { kind: 'unload-driver', driver: 'drsample', modules: [CORE, NET] },
      { kind: 'release-device' },
      { kind: 'unload-driver', driver: 'drsample', modules: [CORE, NET] },
    ];
    const real = await runInGuest('simulated vs real', steps(freshTree()), ['ModuleBusyError', 'DriverInUseError', 'ConfigError', 'KernelCommandError']);

    const hostDir = await mkdtemp(join(tmpdir(), 'kernel-test-simulated-'));
    try {
      const sysModuleDir = join(hostDir, 'sys', 'module');
      const kernel = new SimulatedKernel({ sysModuleDir, runningKernelVersion: guest.kernel.version });
      const tree = { root: join(hostDir, 'root'), kernelVersion: guest.kernel.version, configDir: join(hostDir, 'modprobe.d') };
      const world = simulatedWorld(kernel, sysModuleDir, () => CORE);
      const simulated = await runScenario(world, { steps: steps(tree), watch: [CORE, NET] }, silentLogger());
      expect(simulated.steps.map(comparable)).toEqual(real.map(comparable));
    } finally {
      await rm(hostDir, { recursive: true, force: true });
    }
  });

  it("ends a load the kernel rejects in modprobe's own reason, with nothing left half-loaded", async () => {
    const tree = freshTree();
    // A charp parameter longer than 1024 bytes: the kernel's param_set_charp fails the init_module call (ENOSPC).
    const steps = await runInGuest('kernel rejects the load', [reload(v1, tree, { [CORE]: { greeting: 'x'.repeat(1025) } })], ['ModuleLoadError']);
    const rejected = stepAt(steps, 0);
    expect(rejected.error?.name).toBe('ModuleLoadError');
    expect(rejected.error?.message).toBe("drsample_core failed to load: could not insert 'drsample_core': No space left on device; no driver module left loaded");
    expect(rejected.after).toEqual({ [CORE]: null, [NET]: null });
  });
});
