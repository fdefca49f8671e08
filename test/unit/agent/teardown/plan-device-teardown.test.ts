import { describe, expect, it } from 'vitest';
import type { PciDevice } from '../../../../agent/detect/pci-device.ts';
import { isEmptyTeardown, planDeviceTeardown, virtualFunctionsTouched } from '../../../../agent/teardown/plan-device-teardown.ts';

const fn = (address: string, driver: string | undefined, over: Partial<PciDevice> = {}): PciDevice => ({
  address, vendor: '0x15b3', device: '0x1021', classCode: '0x020000', driver, numaNode: 0, sriov: undefined, physicalFunction: undefined, netInterfaces: [], ...over,
});
const pf = fn('0000:29:00.0', 'mlx5_core', { sriov: { totalVfs: 16, numVfs: 2, virtualFunctions: ['0000:29:00.2', '0000:29:00.3'] } });
const functions = [pf, fn('0000:29:00.2', 'vfio-pci', { physicalFunction: pf.address }), fn('0000:29:00.3', 'mlx5_core', { physicalFunction: pf.address })];

describe('planDeviceTeardown', () => {
  it('removes the VFs of a served PF and unbinds those on an unbind driver', () => {
    const plan = planDeviceTeardown([pf], functions, { removeVirtualFunctions: true, unbindDrivers: ['vfio-pci'] });
    expect(plan).toEqual({
      unbind: [{ address: '0000:29:00.2', driver: 'vfio-pci' }],
      removeVirtualFunctions: [{ physicalFunction: '0000:29:00.0', numVfs: 2, virtualFunctions: ['0000:29:00.2', '0000:29:00.3'] }],
    });
    expect(virtualFunctionsTouched(plan)).toEqual([
      { address: '0000:29:00.2', physicalFunction: '0000:29:00.0' },
      { address: '0000:29:00.3', physicalFunction: '0000:29:00.0' },
    ]);
  });

  it.each([
    ['SR-IOV teardown off, no unbind drivers', [pf], { removeVirtualFunctions: false, unbindDrivers: [] }],
    ['a PF without VFs enabled', [fn('0000:29:00.0', 'mlx5_core', { sriov: { totalVfs: 16, numVfs: 0, virtualFunctions: [] } })], { removeVirtualFunctions: true, unbindDrivers: ['vfio-pci'] }],
    ['no served device', [], { removeVirtualFunctions: true, unbindDrivers: ['vfio-pci'] }],
  ])('plans nothing for %s', (_name, served, settings) => {
    expect(isEmptyTeardown(planDeviceTeardown(served, functions, settings))).toBe(true);
  });

  it('unbinds a served function itself bound to an unbind driver (a GPU passed through with vfio-pci)', () => {
    const gpu = fn('0000:18:00.0', 'vfio-pci', { vendor: '0x10de' });
    expect(planDeviceTeardown([gpu], [gpu], { removeVirtualFunctions: true, unbindDrivers: ['vfio-pci'] }).unbind).toEqual([{ address: '0000:18:00.0', driver: 'vfio-pci' }]);
  });
});
