import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAgentConfig } from '../../../../agent/config/parse-agent-config.ts';
import { createAgentSteps } from '../../../../agent/create-agent-steps.ts';
import { fixedHostInfo } from '../../../../agent/detect/host-info.ts';
import { createLogger } from '../../../../shared/logger.ts';
import { waitUntil } from '../../../bed/wait-until.ts';
import { SimulatedKernel } from '../../../doubles/simulated-kernel.ts';
import { isRunning, writeStandInDaemon } from '../../../fixtures/daemons/stand-in-daemon.ts';
import { aGpuNode, aNicOnlyNode } from '../../../fixtures/sysfs/sysfs-tree.ts';
import { writeSampleDriverSource } from '../agent-fixtures.ts';
import { installedHeadersKernel } from '../build/sample-driver.ts';
import { DEBIAN_LIBS } from '../user-space/debian-layout.ts';

// The agent's steps with a driver root (DRIVER_ROOT_DIR): the sample driver 1.0.0 (real kbuild) on the
// SIMULATED kernel (this machine's must not be touched), whose device files count their holders'
// open files in refcnt as the kernel's do; the root holds libraries and an nvidia-smi of 1.0.0 and
// a test-side executable STANDING IN for nvidia-persistenced, which keeps the driver's device
// file open as the real one keeps /dev/nvidia*. The unload on stop succeeds only because the agent
// stops the daemon first.

const kernelRelease = installedHeadersKernel();
const log = createLogger('test', 'silent');
let work: string;
/** Daemons a failed expectation left running. */
const leftOver: number[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'agent-steps-daemons-'));
});
afterAll(async () => {
  for (const pid of leftOver) if (await isRunning(pid)) process.kill(pid, 'SIGKILL');
  await rm(work, { recursive: true, force: true });
});

/** A Debian-laid-out root of one version (empty library files, a stand-in nvidia-smi). */
async function aUserSpaceRoot(root: string, version: string): Promise<void> {
  await mkdir(join(root, DEBIAN_LIBS), { recursive: true });
  for (const lib of ['libcuda', 'libnvidia-ml', 'libnvidia-cfg']) {
    await writeFile(join(root, DEBIAN_LIBS, `${lib}.so.${version}`), '');
    await symlink(`${lib}.so.${version}`, join(root, DEBIAN_LIBS, `${lib}.so.1`));
  }
  await mkdir(join(root, 'usr/lib/nvidia/current'), { recursive: true });
  await writeFile(join(root, 'usr/lib/nvidia/current/nvidia-smi'), `#!/bin/sh\n# stand-in for nvidia-smi\necho 'NVIDIA System Management Interface -- v${version}'\n`, { mode: 0o755 });
}

/** The sample driver 1.0.0 serving `kind`'s devices on a node under `node`, with the driver root `root`. */
async function sampleDriverConfig(node: string, kind: 'gpu' | 'nic', sysfsRoot: string, root: string) {
  return parseAgentConfig([], {
    NODE_NAME: 'n1',
    POD_NAME: `${kind}-driver-1`,
    POD_NAMESPACE: 'driver-rollout',
    DRIVER_NAME: 'drsample',
    DEVICE_KIND: kind,
    DRIVER_VERSION: '1.0.0',
    DRIVER_SOURCE_DIR: await writeSampleDriverSource(join(node, 'src'), '1.0.0'),
    KERNEL_VERSION: kernelRelease,
    SYSFS_ROOT: sysfsRoot,
    MODULE_ROOT: join(node, 'root'),
    MODPROBE_CONFIG_DIR: join(node, 'modprobe.d'),
    CACHE_DIR: join(work, 'cache'),
    READY_FILE: join(node, '.driver-ready'),
    LOCK_PATH: join(node, 'agent.lock'),
    DRIVER_ROOT_DIR: root,
    DAEMON_RUN_DIR: join(node, 'run'),
  });
}

describe('the agent steps run nvidia-persistenced from the root and stop it before an unload', () => {
  it('loads, starts the daemon beside the verified driver, and on unload stops it first (it holds the device file)', async () => {
    const node = join(work, 'node');
    const sysfsRoot = await aGpuNode().writeTo(join(node, 'sys'));
    const deviceDir = join(node, 'dev');
    const root = join(node, 'image-root');
    await aUserSpaceRoot(root, '1.0.0');
    const persistenced = await writeStandInDaemon(join(root, 'usr/bin/nvidia-persistenced'), join(node, 'persistenced-state'), {
      pidFile: join(node, 'run', 'nvidia-persistenced', 'nvidia-persistenced.pid'),
      holdOpen: join(deviceDir, 'drsample_core'),
    });
    const config = await sampleDriverConfig(node, 'gpu', sysfsRoot, root);
    const kernel = new SimulatedKernel({ sysModuleDir: join(sysfsRoot, 'module'), runningKernelVersion: kernelRelease, deviceDir });
    const steps = createAgentSteps(config, kernel, fixedHostInfo({ kernelRelease, distro: 'debian', distroRelease: '12', arch: 'x64' }), log);
    const signal = new AbortController().signal;

    const built = await steps.build(await steps.detect(), signal);
    expect((await steps.load(built, signal)).changed).toBe(true);
    await steps.verify(built);
    const pid = await waitUntil('persistenced running', persistenced.pid);
    leftOver.push(pid);
    expect(await persistenced.starts()).toEqual([`--persistence-mode --nvidia-cfg-path=${join(root, DEBIAN_LIBS)}`]);
    // The daemon's open device file counts in the module's refcnt, as the kernel counts it.
    await waitUntil('the daemon holding drsample_core', async () => {
      const core = await kernel.readModule('drsample_core');
      return core !== undefined && core.refcnt > core.holders.length ? core : undefined;
    });

    await steps.unload(signal);
    expect(await isRunning(pid)).toBe(false);
    expect((await kernel.listLoaded()).map((m) => m.name).filter((m) => m.startsWith('drsample'))).toEqual([]);
  }, 300_000);
});

describe("a driver root of a driver that serves no NVIDIA GPU (the dkms-nic preset's: the C library only)", () => {
  it('is not held to NVIDIA\'s user space: the load goes ahead without libcuda, libnvidia-ml or nvidia-smi in it', async () => {
    const node = join(work, 'nic-node');
    const sysfsRoot = await aNicOnlyNode().writeTo(join(node, 'sys'));
    const root = join(node, 'image-root');
    await mkdir(join(root, 'usr/lib/x86_64-linux-gnu'), { recursive: true });
    const config = await sampleDriverConfig(node, 'nic', sysfsRoot, root);
    const kernel = new SimulatedKernel({ sysModuleDir: join(sysfsRoot, 'module'), runningKernelVersion: kernelRelease });
    const steps = createAgentSteps(config, kernel, fixedHostInfo({ kernelRelease, distro: 'debian', distroRelease: '12', arch: 'x64' }), log);
    const signal = new AbortController().signal;

    const built = await steps.build(await steps.detect(), signal);
    expect((await steps.load(built, signal)).changed).toBe(true);
    await expect(steps.verify(built)).resolves.toMatchObject({ version: '1.0.0' });
    await steps.unload(signal);
  }, 300_000);
});
