import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuiltDriver } from '../../agent/build/built-driver.ts';
import { driverFlavour, type DriverFlavour } from '../../drivers/flavours.ts';
import { runCachedBuild } from '../bed/ensure-binaries.ts';
import { aGeForce, aSysfsTree } from '../fixtures/sysfs/sysfs-tree.ts';
import { extractFromImage } from '../images/extract-from-image.ts';
import { buildSampleDriver } from '../unit/agent/build/sample-driver.ts';
import { ensureNvidiaModules, ensureNvidiaProprietaryModules, nvidiaTestKernel, type NvidiaModules } from '../vendor-drivers/ensure-vendor-builds.ts';
import { bootGuest, type Guest } from './harness/boot-guest.ts';
import { defaultCacheDir } from './harness/build-initramfs.ts';
import { findTestKernel, type TestKernel } from './harness/find-test-kernel.ts';
import { runAgentSteps, stepAt } from './harness/run-agent-steps.ts';
import { GUEST_NODE_COMPILE_CACHE } from './harness/run-guest-scenario.ts';
import { GUEST_AGENT_ENV } from './harness/guest-agent-env.ts';

/*
 * The NVIDIA driver images' modules (drivers/build-driver-images.ts: NVIDIA's proprietary
 * 535.309.01 and open 535.261.03 modules from Debian's packages, prebuilt by the agent's dkms
 * recipe) on Debian's kernel under QEMU, which has no NVIDIA GPU: the whole agent (assembleAgent,
 * configured as its DaemonSet is, with the real kernel adapter) is told by a fixture sysfs that
 * the node has one, and tries to load the driver. nvidia's init finds no GPU ("NVRM: No NVIDIA
 * GPU found.", ENODEV); the agent must report LoadFailed naming nvidia although modprobe was
 * asked for nvidia_uvm, leave none of the driver loaded, and leave the driver that ran before
 * (the sample driver) as it was.
 *
 * Each flavour boots the newest kernel it builds for, the one its image carries modules for:
 * - the proprietary flavour, 6.1.0-56-amd64: the machine's installed kernel, whose module tree is
 *   the node's host tree (HOST_MODULE_ROOT=/);
 * - the open flavour, 6.1.0-50-amd64: Debian's linux-image-6.1.0-50-amd64, fetched and unpacked
 *   (never installed) by scripts/ensure-vendor-packages.sh, whose module tree (depmod'ed in the
 *   unpacked package) is the node's host tree. The sample driver is built for that kernel too.
 *
 * The modules and the firmware are copied out of the built image (/opt/lib/modules/<kernel>,
 * /opt/driver-firmware) and reach the agent as the image's prebuilt modules: verified (vermagic,
 * srcversion), not compiled again. A cold NVIDIA build is started in the background by the
 * vendor-drivers global setup; the image build waits for it.
 */

const REPO = resolve(import.meta.dirname, '../..');
const CORE = 'drsample_core';
const NET = 'drsample_net';
const NVIDIA_MODULES = ['nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm', 'nvidia_peermem'];
/** Waits for a cold NVIDIA build (about 15 minutes on an idle 2-core machine, more under load). */
const NVIDIA_BUILD_TIMEOUT_MS = 3_600_000;
const STATE = '/var/lib/driver-rollout';
/** Only catches a hang: at load average 30 the guest took 500 s for this scenario (starting Node there, 119 s for the agent's attempt). */
const SCENARIO_TIMEOUT_MS = 840_000;

interface FlavourCase {
  readonly flavour: DriverFlavour;
  /** The flavour's build (the vendor module cache): the recipe, its sources and package. */
  readonly modules: (kernel: string) => Promise<NvidiaModules>;
  /** The kernel to boot and where its module tree is (the node's host tree). */
  readonly kernel: () => Promise<{ kernel: TestKernel; root: string }>;
}

const CASES: readonly FlavourCase[] = [
  {
    flavour: driverFlavour('nvidia'),
    modules: ensureNvidiaProprietaryModules,
    kernel: async () => {
      const kernel = await findTestKernel();
      const wanted = driverFlavour('nvidia').prebuiltKernels[0];
      if (kernel.version !== wanted) throw new Error(`the installed kernel is ${kernel.version}; the proprietary image carries modules for ${wanted ?? '(none)'}`);
      return { kernel, root: '/' };
    },
  },
  {
    flavour: driverFlavour('nvidia-open'),
    modules: ensureNvidiaModules,
    kernel: async () => {
      const unpacked = await nvidiaTestKernel();
      const kernel = await findTestKernel({ bootDir: join(unpacked.root, 'boot'), modulesRoot: join(unpacked.root, 'lib', 'modules'), headersRoot: '/lib/modules' });
      if (kernel.version !== unpacked.release) throw new Error(`${unpacked.root} holds kernel ${kernel.version}, expected ${unpacked.release}`);
      return { kernel, root: unpacked.root };
    },
  },
];

describe.each(CASES.map((c) => [c.flavour.name, c] as const))("the %s driver image's modules on a kernel without an NVIDIA GPU (Debian's kernel under QEMU, the whole agent)", (_name, flavourCase) => {
  let guest: Guest;
  let sample: BuiltDriver;
  let nvidia: NvidiaModules;
  let hostDir: string;
  /** The node's host module tree: the inbox dependencies (drm, video, ipmi...) come from it. */
  let kernelRoot: string;

  beforeAll(async () => {
    const started = performance.now();
    const { kernel, root } = await flavourCase.kernel();
    kernelRoot = root;
    sample = await buildSampleDriver('1.0.0', join(defaultCacheDir(), 'kernel-test-modules'), { kernelVersion: kernel.version });
    nvidia = await flavourCase.modules(kernel.version);
    const images = await runCachedBuild(join(REPO, 'test/images/build-driver-images.sh'));
    const archive = join(images, `${flavourCase.flavour.name}.tar`);
    // Everything the guest reads from the host is written before the boot (9p cache=loose).
    hostDir = await mkdtemp(join(tmpdir(), 'driver-rollout-nvidia-guest-'));
    await aSysfsTree().with(aGeForce('0000:01:00.0')).writeTo(join(hostDir, 'sys'));
    await extractFromImage(archive, `/opt/lib/modules/${kernel.version}`, join(hostDir, 'prebuilt', kernel.version));
    await extractFromImage(archive, '/opt/driver-firmware', join(hostDir, 'firmware'));
    guest = await bootGuest({ kernel, writableDirs: [GUEST_NODE_COMPILE_CACHE], bootTimeoutMs: 300_000 });
    console.info(
      `kernel tests (${flavourCase.flavour.name} without a GPU): ${guest.kernel.version} booted in ${Math.round(guest.bootMs)} ms; NVIDIA ${nvidia.release} from its image; ready after ${Math.round(performance.now() - started)} ms`,
    );
  }, NVIDIA_BUILD_TIMEOUT_MS);

  afterAll(async () => {
    await (guest as Guest | undefined)?.stop();
    if ((hostDir as string | undefined) !== undefined) await rm(hostDir, { recursive: true, force: true });
  });

  /** The preset's settings for the GPU driver (charts/driver-rollout/templates/_presets.tpl), pointed at this guest's paths. */
  const agentEnv = (): Record<string, string> => ({
    NODE_NAME: 'guest',
    POD_NAME: 'gpu-driver-guest',
    POD_NAMESPACE: 'driver-rollout',
    DRIVER_NAME: 'gpu',
    DRIVER_VERSION: flavourCase.flavour.driverVersion,
    // The recipe the modules were built with; the prebuilt ones for this kernel are used instead.
    DRIVER_SOURCE_DIR: nvidia.sourceDir,
    BUILD_RECIPE: JSON.stringify({ kind: 'dkms', packages: nvidia.packages }),
    PREBUILT_MODULES_DIR: join(hostDir, 'prebuilt'),
    // modprobe is asked for nvidia_uvm first: nvidia comes along as its dependency and is the one that fails.
    DRIVER_MODULES: 'nvidia_uvm nvidia_modeset',
    LOAD_PLAN: 'nvidia',
    MODULE_BLACKLIST: 'nouveau',
    DEVICE_FILE_PREFIXES: '/dev/nvidia',
    SYSFS_ROOT: join(hostDir, 'sys'),
    MODULE_ROOT: `${STATE}/gpu/root`,
    HOST_MODULE_ROOT: kernelRoot,
    FIRMWARE_DIR: join(hostDir, 'firmware'),
    FIRMWARE_HOST_DIR: `${STATE}/gpu/firmware`,
    CACHE_DIR: `${STATE}/cache`,
    ...GUEST_AGENT_ENV,
  });

  it('fails the load cleanly: LoadFailed naming nvidia (modprobe blamed nvidia_uvm), no NVIDIA module left, the previous driver untouched', async () => {
    const steps = await runAgentSteps(guest, 'NVIDIA without a GPU', {
      steps: [
        {
          kind: 'reload',
          built: sample,
          tree: { root: `${STATE}/drsample/root`, kernelVersion: guest.kernel.version, configDir: '/run/modprobe.d' },
          parameters: {},
          more: { hostTree: { root: kernelRoot, kernelVersion: guest.kernel.version, configDir: '/run/modprobe.d' } },
        },
        { kind: 'agent-attempt', env: agentEnv(), timeoutMs: 480_000 },
      ],
      watch: [CORE, NET, ...NVIDIA_MODULES],
    }, { timeoutMs: SCENARIO_TIMEOUT_MS });
    const before = stepAt(steps, 0);
    expect(before.result?.outcome).toBe('loaded-fresh');

    const attempt = stepAt(steps, 1);
    expect(attempt.agentState).toMatchObject({
      phase: 'Failed',
      reason: 'LoadFailed',
      message:
        "Failed: nvidia failed to load: could not insert 'nvidia_uvm': No such device; modprobe nvidia_uvm names nvidia_uvm, the kernel refused nvidia; no driver module left loaded",
      // The fixture's GPU, found by the agent's detection: why it went on to load at all.
      deviceCount: 1,
    });
    // The kernel's own account: nvidia's init found no GPU.
    console.info(`kernel tests: NVIDIA without a GPU, the guest's kernel log:\n${attempt.kernelLog.filter((line) => /nvidia|NVRM/i.test(line)).join('\n')}`);
    expect(attempt.kernelLog).toContainEqual(expect.stringContaining('NVRM: No NVIDIA GPU found.'));
    for (const name of NVIDIA_MODULES) expect(attempt.after[name], name).toBeNull();
    // The driver that ran before is the same, untouched: same srcversions, never unloaded.
    expect(attempt.after[CORE]?.srcversion).toBe(sample.modules.find((m) => m.name === CORE)?.srcversion);
    expect(attempt.after[NET]?.srcversion).toBe(sample.modules.find((m) => m.name === NET)?.srcversion);
    expect(attempt.after[CORE]).toEqual(before.after[CORE]);
    expect(attempt.after[NET]).toEqual(before.after[NET]);
    expect(attempt.kernelLog.filter((line) => /drsample_\w+ \S+ (loaded|unloaded)/.test(line))).toEqual([]);
  }, SCENARIO_TIMEOUT_MS + 60_000);
});
