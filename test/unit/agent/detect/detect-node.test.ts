import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  boundDrivers,
  competingBoundDrivers,
  countVirtualFunctions,
  describeDevice,
  detectNode,
  hasDevices,
} from '../../../../agent/detect/detect-node.ts';
import { DEVICE_KIND_SELECTORS } from '../../../../agent/detect/device-selector.ts';
import type { DeviceKind } from '../../../../shared/device-kind.ts';
import { fixedHostInfo, type HostInfo } from '../../../../agent/detect/host-info.ts';
import { readPciDevices, SysfsUnreadableError } from '../../../../agent/detect/read-pci-devices.ts';
import {
  aGpuNode,
  aNicOnlyNode,
  aNouveauNode,
  anEmptyNode,
  type SysfsTree,
} from '../../../fixtures/sysfs/sysfs-tree.ts';

const host: HostInfo = { kernelRelease: '6.1.0-56-amd64', distro: 'debian', distroRelease: '12', arch: 'x64' };

let workDir: string;
beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'detect-'));
});
afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

async function detect(tree: SysfsTree, kind: DeviceKind, kernelReleaseOverride?: string) {
  const root = await tree.writeTo(await mkdtemp(join(workDir, 'sys-')));
  return detectNode({ sysfsRoot: root, selector: DEVICE_KIND_SELECTORS[kind], hostInfo: fixedHostInfo(host), kernelReleaseOverride });
}

describe('detectNode on fixture sysfs trees', () => {
  it.each([
    // node, kind, served devices, enabled VFs, drivers bound to them
    { node: 'GPU node', tree: aGpuNode, kind: 'gpu', count: 8, vfs: 0, drivers: ['nvidia'] },
    { node: 'GPU node', tree: aGpuNode, kind: 'nic', count: 3, vfs: 8, drivers: ['mlx5_core'] },
    { node: 'NIC-only node', tree: aNicOnlyNode, kind: 'gpu', count: 0, vfs: 0, drivers: [] },
    { node: 'NIC-only node', tree: aNicOnlyNode, kind: 'nic', count: 2, vfs: 0, drivers: ['mlx5_core'] },
    { node: 'nouveau node', tree: aNouveauNode, kind: 'gpu', count: 1, vfs: 0, drivers: ['nouveau'] },
    { node: 'nouveau node', tree: aNouveauNode, kind: 'nic', count: 0, vfs: 0, drivers: [] },
    { node: 'empty node', tree: anEmptyNode, kind: 'gpu', count: 0, vfs: 0, drivers: [] },
    { node: 'empty node', tree: anEmptyNode, kind: 'nic', count: 0, vfs: 0, drivers: [] },
  ] as const)('$node, $kind driver: $count devices, $vfs VFs, bound to $drivers', async (c) => {
    const detection = await detect(c.tree(), c.kind);
    expect(detection.devices).toHaveLength(c.count);
    expect(hasDevices(detection)).toBe(c.count > 0);
    expect(countVirtualFunctions(detection.devices)).toBe(c.vfs);
    expect(boundDrivers(detection.devices)).toEqual(c.drivers);
  });

  it('GPU node: 8 H100s split across NUMA nodes 0 and 1, audio functions of the same vendor left out', async () => {
    const { devices } = await detect(aGpuNode(), 'gpu');
    expect(devices.map((d) => d.device)).toEqual(Array(8).fill('0x2330'));
    expect(devices.map((d) => d.numaNode)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    expect(devices.every((d) => d.classCode === '0x030200')).toBe(true);
  });

  it('GPU node: ConnectX-7 PFs carry their VFs and interfaces; VFs are not devices of their own; IB port counts', async () => {
    const { devices } = await detect(aGpuNode(), 'nic');
    expect(devices.map(describeDevice)).toEqual([
      '0000:29:00.0 15b3:1021 driver=mlx5_core numa=0 vfs=4/16 net=[ens1f0np0]',
      '0000:a9:00.0 15b3:1021 driver=mlx5_core numa=1 vfs=4/16 net=[ens2f0np0]',
      '0000:c1:00.0 15b3:1021 driver=mlx5_core numa=1',
    ]);
    expect(devices[0]?.sriov).toEqual({
      totalVfs: 16,
      numVfs: 4,
      virtualFunctions: ['0000:29:00.2', '0000:29:00.3', '0000:29:00.4', '0000:29:00.5'],
    });
  });

  it('nouveau node: the GPU is detected with nouveau bound, so the agent can tell nouveau holds it', async () => {
    const { devices } = await detect(aNouveauNode(), 'gpu');
    expect(devices.map(describeDevice)).toEqual(['0000:01:00.0 10de:2684 driver=nouveau numa=unknown']);
  });

  it('competing drivers: nouveau holding the GPU competes with nvidia; mlx5_core does not compete with itself', async () => {
    expect(competingBoundDrivers((await detect(aNouveauNode(), 'gpu')).devices, ['nvidia', 'nvidia_uvm'])).toEqual(['nouveau']);
    expect(competingBoundDrivers((await detect(aGpuNode(), 'gpu')).devices, ['nvidia', 'nvidia-modeset'])).toEqual([]);
    expect(competingBoundDrivers((await detect(aNicOnlyNode(), 'nic')).devices, ['mlx5_core', 'mlx5_ib'])).toEqual([]);
  });

  it('the kernel override replaces the running kernel in the detection', async () => {
    expect((await detect(anEmptyNode(), 'gpu')).host.kernelRelease).toBe('6.1.0-56-amd64');
    expect((await detect(anEmptyNode(), 'gpu', '6.8.0-45-generic')).host.kernelRelease).toBe('6.8.0-45-generic');
  });
});

describe('readPciDevices', () => {
  it('reads every function, VFs included, with physfn links back to their PF', async () => {
    const root = await aGpuNode().writeTo(await mkdtemp(join(workDir, 'sys-')));
    const all = await readPciDevices(root);
    const vfs = all.filter((d) => d.physicalFunction !== undefined);
    expect(vfs).toHaveLength(8);
    expect(vfs.find((d) => d.address === '0000:a9:00.3')).toMatchObject({
      device: '0x101e',
      physicalFunction: '0000:a9:00.0',
      netInterfaces: ['ens2f0np0v1'],
    });
    expect(all.map((d) => d.address)).toEqual([...all.map((d) => d.address)].sort());
  });

  it('an unreadable root is an error, not an empty node', async () => {
    await expect(readPciDevices(join(workDir, 'no-such-sysfs'))).rejects.toBeInstanceOf(SysfsUnreadableError);
  });
});
