import { access, mkdir, mkdtemp, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { execa } from 'execa';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { describeFailure } from '../../../../agent/describe-failure.ts';
import { readPciDevices } from '../../../../agent/detect/read-pci-devices.ts';
import { HolderCommandError, VirtualFunctionsInUseError } from '../../../../agent/teardown/teardown-errors.ts';
import { HOST_NAMESPACES_PREFIX } from '../../../../agent/teardown/run-holder-command.ts';
import { createUnloadGuard, type UnloadGuardOptions } from '../../../../agent/teardown/unload-guard.ts';
import type { PciDevice } from '../../../../agent/detect/pci-device.ts';
import { createLogger } from '../../../../shared/logger.ts';
import { aConnectX7, aSysfsTree, type FixtureFunction } from '../../../fixtures/sysfs/sysfs-tree.ts';
import { holdOpen } from '../kernel/fixtures.ts';
import { aDaemonHolder, writeDaemonControl } from './fixtures.ts';

// Device teardown on the FIXTURE sysfs (a tree with sysfs's layout; no kernel reacts to the
// writes, so the tests read back what was written), and host daemons as REAL processes
// (a small daemon the test starts, stopped and started again by the agent's command runner).

const log = createLogger('test', 'silent');
let work: string;
let count = 0;
const children: { kill(): boolean }[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'unload-guard-'));
});
afterEach(() => {
  for (const c of children.splice(0)) c.kill();
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

/** A ConnectX-7 PF with 4 VFs: VF 0 and 1 passed to VMs through vfio-pci (IOMMU groups 40, 41). */
function aNicWithVfioVfs(): FixtureFunction {
  const pf = aConnectX7('0000:29:00.0', 'ens1f0np0', 0, 4);
  const vfs = (pf.sriov?.vfs ?? []).map((vf, i): FixtureFunction => (i < 2 ? { ...vf, driver: 'vfio-pci', netInterfaces: [], iommuGroup: 40 + i } : vf));
  return { ...pf, sriov: { totalVfs: 16, vfs } };
}

async function aNode(over: Partial<UnloadGuardOptions> = {}) {
  const dir = join(work, `node-${++count}`);
  const sysfsRoot = await aSysfsTree().with(aNicWithVfioVfs()).writeTo(join(dir, 'sys'));
  await mkdir(join(dir, 'vfio'), { recursive: true });
  for (const group of ['40', '41']) await writeFile(join(dir, 'vfio', group), '');
  const options: UnloadGuardOptions = {
    driver: 'ofed',
    sysfsRoot,
    procDir: '/proc',
    vfioDir: join(dir, 'vfio'),
    recordPath: join(dir, 'cache', 'teardown', 'ofed.json'),
    holders: [],
    hostPrefix: HOST_NAMESPACES_PREFIX,
    devices: { removeVirtualFunctions: true, unbindDrivers: ['vfio-pci'] },
    now: () => new Date('2026-11-23T03:00:00Z'),
    log,
    ...over,
  };
  const served = (await readPciDevices(sysfsRoot)).filter((d): d is PciDevice => d.address === '0000:29:00.0');
  const read = (path: string) => readFile(join(sysfsRoot, path), 'utf8').then((t) => t.trim());
  return { dir, sysfsRoot, options, served, read };
}

/** Whether nsenter may enter the namespaces of `pid` here (needs CAP_SYS_ADMIN over them). */
function canEnter(pid: string): boolean {
  return spawnSync('nsenter', ['--target', pid, '--mount', '--uts', '--ipc', '--net', '--pid', '--', 'true']).status === 0;
}

const exists = (path: string) => access(path).then(() => true, () => false);
const daemonPid = async (dir: string) => Number((await readFile(join(dir, 'pid'), 'utf8')).trim());
const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('device teardown and restore (fixture sysfs)', () => {
  it('unbinds the vfio-pci VFs, removes the VFs, records it on the host; restore re-creates and rebinds them', async () => {
    const node = await aNode();
    const guard = createUnloadGuard(node.options);
    await guard.takeDown(node.served);

    expect(await node.read('bus/pci/devices/0000:29:00.0/sriov_numvfs')).toBe('0');
    expect(await node.read('bus/pci/drivers/vfio-pci/unbind')).toBe('0000:29:00.3'); // the last of the two unbinds
    expect(JSON.parse(await readFile(node.options.recordPath, 'utf8'))).toEqual({
      driver: 'ofed',
      holders: [],
      removedVirtualFunctions: [{ physicalFunction: '0000:29:00.0', numVfs: 4, virtualFunctions: ['0000:29:00.2', '0000:29:00.3', '0000:29:00.4', '0000:29:00.5'] }],
      removedBindings: [{ address: '0000:29:00.2', driver: 'vfio-pci' }, { address: '0000:29:00.3', driver: 'vfio-pci' }],
      recordedAt: '2026-11-23T03:00:00.000Z',
    });

    // What the kernel would show after the new PF driver probed: VFs re-created bound to mlx5_core.
    for (const vf of ['0000:29:00.2', '0000:29:00.3']) {
      await rm(join(node.sysfsRoot, 'bus/pci/devices', vf, 'driver'));
      await symlink('../../../bus/pci/drivers/mlx5_core', join(node.sysfsRoot, 'bus/pci/devices', vf, 'driver'));
    }
    expect(await guard.restore()).toBe(true);
    expect(await node.read('bus/pci/devices/0000:29:00.0/sriov_numvfs')).toBe('4');
    for (const vf of ['0000:29:00.2', '0000:29:00.3']) expect(await node.read(`bus/pci/devices/${vf}/driver_override`)).toBe('vfio-pci');
    expect(await node.read('bus/pci/drivers/mlx5_core/unbind')).toBe('0000:29:00.3');
    expect(await node.read('bus/pci/drivers/vfio-pci/bind')).toBe('0000:29:00.3');
    expect(await exists(node.options.recordPath)).toBe(false);
    expect(await guard.restore()).toBe(false);
  });

  it('a new agent (another guard over the same host record) finishes the restore', async () => {
    const node = await aNode();
    await createUnloadGuard(node.options).takeDown(node.served);
    expect(await createUnloadGuard(node.options).restore()).toBe(true);
    expect(await node.read('bus/pci/devices/0000:29:00.0/sriov_numvfs')).toBe('4');
    expect(await exists(node.options.recordPath)).toBe(false);
  });

  it('refuses, naming the VF, its PF and the process, when a VF\'s VFIO device is open; nothing changed', async () => {
    const node = await aNode();
    const vm = await holdOpen(join(node.dir, 'vfio', '41'));
    children.push(vm);
    const error = await createUnloadGuard(node.options).takeDown(node.served).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(VirtualFunctionsInUseError);
    expect((error as VirtualFunctionsInUseError).virtualFunctions).toEqual(['0000:29:00.3']);
    expect((error as Error).message).toContain(`0000:29:00.3 (VF of 0000:29:00.0; pid ${vm.pid} (sleep) has ${join(node.dir, 'vfio', '41')} open)`);
    expect(describeFailure('load', error).reason).toBe('VirtualFunctionsInUse');
    expect(await node.read('bus/pci/devices/0000:29:00.0/sriov_numvfs')).toBe('4');
    expect(await readlink(join(node.sysfsRoot, 'bus/pci/devices/0000:29:00.3/driver'))).toContain('vfio-pci');
    expect(await exists(node.options.recordPath)).toBe(false);
  });

  it('with SRIOV_TEARDOWN off and no unbind drivers, leaves the devices alone', async () => {
    const node = await aNode({ devices: { removeVirtualFunctions: false, unbindDrivers: [] } });
    await createUnloadGuard(node.options).takeDown(node.served);
    expect(await node.read('bus/pci/devices/0000:29:00.0/sriov_numvfs')).toBe('4');
    expect(await exists(node.options.recordPath)).toBe(false);
  });
});

describe('host daemons around the unload (real processes)', { timeout: 60_000 }, () => {
  it('stops a running daemon before the unload and starts it again after the load; one not running is left alone', async () => {
    const node = await aNode({ devices: { removeVirtualFunctions: false, unbindDrivers: [] } });
    const running = join(node.dir, 'persistenced');
    const stopped = join(node.dir, 'fabricmanager');
    const script = await writeDaemonControl(running);
    await writeDaemonControl(stopped);
    await execa(script, ['start', running]);
    const before = await daemonPid(running);
    expect(isAlive(before)).toBe(true);
    const guard = createUnloadGuard({ ...node.options, holders: [aDaemonHolder('persistenced', script, running), aDaemonHolder('fabricmanager', script, stopped)] });

    await guard.takeDown(node.served);
    expect(isAlive(before)).toBe(false);
    expect(JSON.parse(await readFile(node.options.recordPath, 'utf8'))).toMatchObject({ holders: ['persistenced'] });

    expect(await guard.restore()).toBe(true);
    const after = await daemonPid(running);
    expect(after).not.toBe(before);
    expect(isAlive(after)).toBe(true);
    expect(await exists(join(stopped, 'pid'))).toBe(false);
    process.kill(after);
  });

  // The shipped prefix enters PID 1's namespaces (the pod has hostPID). Where this test runs,
  // PID 1's may be closed to it (a sandbox): then the same nsenter line targets the test's own.
  it.skipIf(!canEnter('1'))('runs a host holder through nsenter --target 1 (the shipped prefix)', async () => {
    await stopAndStartThrough(HOST_NAMESPACES_PREFIX);
  });

  it('runs a host holder through the same nsenter line into this process\'s namespaces', async () => {
    await stopAndStartThrough(HOST_NAMESPACES_PREFIX.map((a) => (a === '1' ? String(process.pid) : a)));
  });

  async function stopAndStartThrough(hostPrefix: readonly string[]): Promise<void> {
    const node = await aNode({ devices: { removeVirtualFunctions: false, unbindDrivers: [] }, hostPrefix });
    const dir = join(node.dir, 'hostd');
    const script = await writeDaemonControl(dir);
    await execa(script, ['start', dir]);
    const before = await daemonPid(dir);
    const guard = createUnloadGuard({ ...node.options, holders: [aDaemonHolder('hostd', script, dir, { on: 'host' })] });
    await guard.takeDown(node.served);
    expect(isAlive(before)).toBe(false);
    await guard.restore();
    const after = await daemonPid(dir);
    expect(isAlive(after)).toBe(true);
    process.kill(after);
  }

  it('a stop that runs past its timeout fails with HolderCommandFailed naming it; what was already stopped is started again', async () => {
    const node = await aNode();
    const dir = join(node.dir, 'persistenced');
    const script = await writeDaemonControl(dir);
    await execa(script, ['start', dir]);
    const before = await daemonPid(dir);
    const hung = { name: 'nv-fabricmanager', on: 'image' as const, check: undefined, stop: ['sleep', '30'], start: ['true'], timeoutMs: 500 };
    const guard = createUnloadGuard({ ...node.options, holders: [aDaemonHolder('persistenced', script, dir), hung] });

    const error = await guard.takeDown(node.served).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HolderCommandError);
    expect((error as HolderCommandError).timedOut).toBe(true);
    expect((error as Error).message).toBe('cannot stop nv-fabricmanager (sleep 30) before the unload: it did not finish within 0.5 s');
    expect(describeFailure('load', error)).toEqual({ reason: 'HolderCommandFailed', message: `Failed: ${(error as Error).message}` });
    const after = await daemonPid(dir);
    expect(after).not.toBe(before);
    expect(isAlive(after)).toBe(true);
    // Nothing stays taken down: the VFs are back and the record is gone.
    expect(await node.read('bus/pci/devices/0000:29:00.0/sriov_numvfs')).toBe('4');
    expect(await exists(node.options.recordPath)).toBe(false);
    process.kill(after);
  });

  it('a start that fails after the load keeps the record (retried) and names the exit code and output', async () => {
    const node = await aNode({ devices: { removeVirtualFunctions: false, unbindDrivers: [] } });
    const broken = { name: 'nvlsm', on: 'image' as const, check: undefined, stop: ['true'], start: ['sh', '-c', 'echo "nvlsm: no IB device" >&2; exit 3'], timeoutMs: 5_000 };
    const guard = createUnloadGuard({ ...node.options, holders: [broken] });
    await guard.takeDown(node.served);
    const error = await guard.restore().catch((e: unknown) => e);
    expect((error as Error).message).toBe('cannot start nvlsm (sh -c echo "nvlsm: no IB device" >&2; exit 3) after the load: it exited 3: nvlsm: no IB device');
    expect(await exists(node.options.recordPath)).toBe(true);
  });
});
