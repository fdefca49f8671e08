import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DaemonFailedError, FabricManagerMissingError } from '../../../../agent/daemons/daemon-errors.ts';
import { createGpuDaemons, type GpuDaemons } from '../../../../agent/daemons/gpu-daemons.ts';
import { isNvSwitch, planGpuDaemons, type GpuDaemonBinaries } from '../../../../agent/daemons/plan/plan-gpu-daemons.ts';
import { describeFailure } from '../../../../agent/describe-failure.ts';
import { DEVICE_KIND_SELECTORS, selectDevices } from '../../../../agent/detect/device-selector.ts';
import type { PciDevice } from '../../../../agent/detect/pci-device.ts';
import { readPciDevices } from '../../../../agent/detect/read-pci-devices.ts';
import { createLogger } from '../../../../shared/logger.ts';
import { waitUntil } from '../../../bed/wait-until.ts';
import { isRunning, writeStandInDaemon } from '../../../fixtures/daemons/stand-in-daemon.ts';
import { aGpuNode, anEmptyNode, anHgxNode, type SysfsTree } from '../../../fixtures/sysfs/sysfs-tree.ts';

// Which daemons run beside the GPU driver, on FIXTURE sysfs trees (sysfs's layout: an HGX board's
// GPUs and NVSwitches, a DGX-like node without switches), and the daemons as REAL processes: the
// driver root holds a test-side executable STANDING IN for nvidia-persistenced / nv-fabricmanager
// (test/fixtures/daemons/stand-in-daemon.ts), since the real ones need a GPU.

const log = createLogger('test', 'silent');
let work: string;
let count = 0;
const started: GpuDaemons[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gpu-daemons-'));
});
afterEach(async () => {
  for (const d of started.splice(0)) await d.stop();
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

async function devicesOf(tree: SysfsTree): Promise<{ sysfsRoot: string; all: PciDevice[]; gpus: PciDevice[] }> {
  const sysfsRoot = await tree.writeTo(join(work, `sys-${++count}`));
  const all = await readPciDevices(sysfsRoot);
  return { sysfsRoot, all, gpus: selectDevices(all, DEVICE_KIND_SELECTORS.gpu) };
}

const none: GpuDaemonBinaries = { persistenced: undefined, fabricManager: undefined, libraryDir: undefined, fabricManagerConfig: undefined };
const both: GpuDaemonBinaries = {
  persistenced: '/root/usr/bin/nvidia-persistenced',
  fabricManager: '/root/usr/bin/nv-fabricmanager',
  libraryDir: '/root/usr/lib/x86_64-linux-gnu/nvidia/current',
  fabricManagerConfig: '/root/usr/share/nvidia/nvswitch/fabricmanager.cfg',
};

const persistencedSpec = {
  name: 'nvidia-persistenced',
  argv: ['/root/usr/bin/nvidia-persistenced', '--persistence-mode', '--nvidia-cfg-path=/root/usr/lib/x86_64-linux-gnu/nvidia/current'],
  pidFile: '/var/run/nvidia-persistenced/nvidia-persistenced.pid',
  // Its socket's directory, and where the container toolkit looks for it in the driver root.
  runDir: { path: '/var/run/nvidia-persistenced', inRoot: '/var/run/nvidia-persistenced' },
};

describe('planGpuDaemons (pure), on fixture sysfs', () => {
  it('finds the NVSwitches of an HGX board: NVIDIA, class 0x0680; never a GPU', async () => {
    const { all, gpus } = await devicesOf(anHgxNode());
    expect(all.filter(isNvSwitch).map((d) => d.address)).toEqual(['0000:05:00.0', '0000:06:00.0', '0000:07:00.0', '0000:08:00.0']);
    expect(gpus).toHaveLength(8);
    expect(gpus.filter(isNvSwitch)).toEqual([]);
  });

  it.each([
    ['no GPU: nothing, whatever the root has', anEmptyNode, both, { kind: 'run', daemons: [] }],
    ['GPUs, a root without daemons: nothing', aGpuNode, none, { kind: 'run', daemons: [] }],
    [
      'GPUs, persistenced in the root: persistence mode, the libraries found',
      aGpuNode,
      both,
      {
        kind: 'run',
        daemons: [persistencedSpec],
      },
    ],
    [
      'an HGX board, no fabric manager in the root: refused, naming the switches',
      anHgxNode,
      { ...both, fabricManager: undefined },
      { kind: 'refuse', nvSwitches: ['0000:05:00.0', '0000:06:00.0', '0000:07:00.0', '0000:08:00.0'], message: 'NVSwitch present, no fabric manager in the image (NVSwitch 0000:05:00.0, 0000:06:00.0, 0000:07:00.0, 0000:08:00.0)' },
    ],
    [
      'an HGX board with the fabric manager: both daemons',
      anHgxNode,
      both,
      {
        kind: 'run',
        daemons: [
          persistencedSpec,
          { name: 'nv-fabricmanager', argv: ['/root/usr/bin/nv-fabricmanager', '-c', '/root/usr/share/nvidia/nvswitch/fabricmanager.cfg'], pidFile: '/var/run/nvidia-fabricmanager/nv-fabricmanager.pid',
            runDir: { path: '/var/run/nvidia-fabricmanager', inRoot: '/var/run/nvidia-fabricmanager' },
          },
        ],
      },
    ],
  ])('%s', async (_name, node, binaries, expected) => {
    const { all, gpus } = await devicesOf(node());
    expect(planGpuDaemons(gpus, all, binaries)).toEqual(expected);
  });

  it("puts each daemon's run dir under the configured run dir, and its place in the root where the toolkit looks, whatever the run dir", async () => {
    const { all, gpus } = await devicesOf(anHgxNode());
    const plan = planGpuDaemons(gpus, all, both, '/node/run');
    if (plan.kind !== 'run') throw new Error(plan.message);
    expect(plan.daemons.map((d) => [d.pidFile, d.runDir])).toEqual([
      ['/node/run/nvidia-persistenced/nvidia-persistenced.pid', { path: '/node/run/nvidia-persistenced', inRoot: '/var/run/nvidia-persistenced' }],
      ['/node/run/nvidia-fabricmanager/nv-fabricmanager.pid', { path: '/node/run/nvidia-fabricmanager', inRoot: '/var/run/nvidia-fabricmanager' }],
    ]);
  });
});

// Real processes on a shared, loaded machine: the bound only catches a hang.
describe('createGpuDaemons: the daemons of the driver root beside a loaded driver', { timeout: 120_000 }, () => {
  /** A driver root with stand-ins for the daemons it names, pid files under its own run dir. */
  async function aRoot(daemons: readonly ('nvidia-persistenced' | 'nv-fabricmanager')[]) {
    const dir = join(work, `root-${++count}`);
    const runDir = join(dir, 'run');
    const pidFiles = { 'nvidia-persistenced': 'nvidia-persistenced/nvidia-persistenced.pid', 'nv-fabricmanager': 'nvidia-fabricmanager/nv-fabricmanager.pid' };
    const standIns = await Promise.all(
      daemons.map((name) => writeStandInDaemon(join(dir, 'root', 'usr', 'bin', name), join(dir, 'state', name), { pidFile: join(runDir, pidFiles[name]) })),
    );
    await mkdir(join(dir, 'root', 'usr', 'lib', 'x86_64-linux-gnu', 'nvidia', 'current'), { recursive: true });
    await writeFile(join(dir, 'root', 'usr', 'lib', 'x86_64-linux-gnu', 'nvidia', 'current', 'libnvidia-cfg.so.1'), '');
    return { root: join(dir, 'root'), runDir, standIns };
  }

  function daemonsFor(root: string, runDir: string, sysfsRoot: string): GpuDaemons {
    const d = createGpuDaemons({ root, sysfsRoot, runDir, restart: { initialMs: 20, maxMs: 200 }, pollMs: 20, stopTimeoutMs: 5000, random: () => 0, log });
    started.push(d);
    return d;
  }

  /** A GPU node whose root has a stand-in nvidia-persistenced, and the daemons over them. */
  async function aGpuNodeWithPersistenced() {
    const { root, runDir, standIns } = await aRoot(['nvidia-persistenced']);
    const [persistenced] = standIns;
    if (persistenced === undefined) throw new Error('no stand-in');
    const { sysfsRoot, gpus } = await devicesOf(aGpuNode());
    return { root, runDir, persistenced, gpus, daemons: daemonsFor(root, runDir, sysfsRoot) };
  }

  it('starts nvidia-persistenced from the root on a GPU node, and stops it before an unload', async () => {
    const { root, persistenced, gpus, daemons } = await aGpuNodeWithPersistenced();
    expect(await daemons.ensureRunning(gpus)).toEqual(['nvidia-persistenced']);
    const pid = await waitUntil('persistenced running', persistenced.pid);
    expect(await persistenced.starts()).toEqual([`--persistence-mode --nvidia-cfg-path=${join(root, 'usr/lib/x86_64-linux-gnu/nvidia/current')}`]);
    expect(daemons.supervising()).toBe(true);
    await daemons.stop();
    expect(await isRunning(pid)).toBe(false);
    expect(daemons.supervising()).toBe(false);
  });

  it("with the root's copy to publish, persistenced writes into the root's /var/run/nvidia-persistenced, and after a reload into the new copy's", async () => {
    const { runDir, persistenced, gpus, daemons } = await aGpuNodeWithPersistenced();
    const [v1, v2] = [join(work, `copy-${++count}`), join(work, `copy-${++count}`)];
    // Debian's layout in the first copy (var/run -> /run, absolute), none in the second.
    await mkdir(join(v1, 'var'), { recursive: true });
    await symlink('/run', join(v1, 'var', 'run'));
    await mkdir(v2);

    await daemons.ensureRunning(gpus, v1);
    const pid = await waitUntil('persistenced running', persistenced.pid);
    expect(await readFile(join(v1, 'run', 'nvidia-persistenced', 'nvidia-persistenced.pid'), 'utf8')).toBe(`${pid}\n`);
    expect(await realpath(join(runDir, 'nvidia-persistenced'))).toBe(await realpath(join(v1, 'run', 'nvidia-persistenced')));

    // A reload stops the daemons; the new driver's root is another copy.
    await daemons.stop();
    await daemons.ensureRunning(gpus, v2);
    const next = await waitUntil('persistenced running again', async () => {
      const p = await persistenced.pid();
      return p !== pid ? p : undefined;
    });
    expect(await readFile(join(v2, 'var', 'run', 'nvidia-persistenced', 'nvidia-persistenced.pid'), 'utf8')).toBe(`${next}\n`);
    // The 30 s re-check leaves a running daemon's link alone.
    await daemons.ensureRunning(gpus, v1);
    expect(await realpath(join(runDir, 'nvidia-persistenced'))).toBe(await realpath(join(v2, 'var', 'run', 'nvidia-persistenced')));
  });

  it('reports a daemon that keeps failing as DaemonFailed, and Ready again once it runs', async () => {
    const { root, runDir, standIns } = await aRoot(['nvidia-persistenced']);
    const [persistenced] = standIns;
    if (persistenced === undefined) throw new Error('no stand-in');
    await persistenced.failStarts('Failed to open libnvidia-cfg.so.1');
    const { sysfsRoot, gpus } = await devicesOf(aGpuNode());
    const daemons = daemonsFor(root, runDir, sysfsRoot);
    const error = await waitUntil('a failed start reported', async () => {
      try {
        await daemons.ensureRunning(gpus);
        return undefined;
      } catch (e) {
        return e;
      }
    });
    expect(error).toBeInstanceOf(DaemonFailedError);
    const { reason, message } = describeFailure('verify', error);
    expect(reason).toBe('DaemonFailed');
    expect(message).toMatch(/^Failed: nvidia-persistenced is not running: exited with code 1: stand-in: Failed to open libnvidia-cfg.so.1 \(restart \d+, retried with backoff\)$/);
    await persistenced.allowStarts();
    await waitUntil('persistenced running', persistenced.pid);
    await waitUntil('no failure reported', async () => (await daemons.ensureRunning(gpus).then(() => true, () => undefined)));
  });

  it('refuses Ready on an NVSwitch board whose root has no fabric manager, with the reason people read', async () => {
    const { root, runDir } = await aRoot(['nvidia-persistenced']);
    const { sysfsRoot, gpus } = await devicesOf(anHgxNode());
    const daemons = daemonsFor(root, runDir, sysfsRoot);
    const error = await daemons.ensureRunning(gpus).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FabricManagerMissingError);
    expect(describeFailure('verify', error).reason).toBe('FabricManagerMissing');
    expect(describeFailure('verify', error).message).toMatch(/^Failed: NVSwitch present, no fabric manager in the image \(NVSwitch 0000:05:00.0, 0000:06:00.0, 0000:07:00.0, 0000:08:00.0\)/);
    expect(daemons.supervising()).toBe(false);
  });

  it('runs the fabric manager beside persistenced on an NVSwitch board whose root has it', async () => {
    const { root, runDir, standIns } = await aRoot(['nvidia-persistenced', 'nv-fabricmanager']);
    const { sysfsRoot, gpus } = await devicesOf(anHgxNode());
    const daemons = daemonsFor(root, runDir, sysfsRoot);
    expect(await daemons.ensureRunning(gpus)).toEqual(['nvidia-persistenced', 'nv-fabricmanager']);
    const pids = await Promise.all(standIns.map((s) => waitUntil(`${s.program} running`, s.pid)));
    await daemons.stop();
    for (const pid of pids) expect(await isRunning(pid)).toBe(false);
  });

  it('runs nothing on a node without a GPU', async () => {
    const { root, runDir, standIns } = await aRoot(['nvidia-persistenced']);
    const { sysfsRoot, gpus } = await devicesOf(anEmptyNode());
    expect(await daemonsFor(root, runDir, sysfsRoot).ensureRunning(gpus)).toEqual([]);
    expect(await standIns[0]?.starts()).toEqual([]);
  });
});
