import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEVICE_KIND_SELECTORS,
  matchesSelector,
  normalizeHexId,
  selectDevices,
  servesNvidiaGpus,
} from '../../../../agent/detect/device-selector.ts';
import type { PciDevice } from '../../../../agent/detect/pci-device.ts';

function aDevice(over: Partial<PciDevice>): PciDevice {
  return {
    address: '0000:01:00.0',
    vendor: '0x10de',
    device: '0x2330',
    classCode: '0x030200',
    driver: undefined,
    numaNode: undefined,
    sriov: undefined,
    physicalFunction: undefined,
    netInterfaces: [],
    ...over,
  };
}

describe('matchesSelector', () => {
  it.each([
    { what: 'NVIDIA 3D controller', vendor: '0x10de', classCode: '0x030200', gpu: true, nic: false },
    { what: 'NVIDIA VGA controller', vendor: '0x10de', classCode: '0x030000', gpu: true, nic: false },
    { what: 'NVIDIA HDMI audio', vendor: '0x10de', classCode: '0x040300', gpu: false, nic: false },
    { what: 'NVIDIA NVSwitch bridge', vendor: '0x10de', classCode: '0x068000', gpu: false, nic: false },
    { what: 'Mellanox Ethernet', vendor: '0x15b3', classCode: '0x020000', gpu: false, nic: true },
    { what: 'Mellanox InfiniBand', vendor: '0x15b3', classCode: '0x020700', gpu: false, nic: true },
    { what: 'Mellanox BlueField DMA engine', vendor: '0x15b3', classCode: '0x080100', gpu: false, nic: false },
    { what: 'Intel Ethernet', vendor: '0x8086', classCode: '0x020000', gpu: false, nic: false },
    { what: 'AMD VGA', vendor: '0x1002', classCode: '0x030000', gpu: false, nic: false },
  ])('$what: gpu=$gpu nic=$nic', ({ vendor, classCode, gpu, nic }) => {
    const d = aDevice({ vendor, classCode });
    expect(matchesSelector(d, DEVICE_KIND_SELECTORS.gpu)).toBe(gpu);
    expect(matchesSelector(d, DEVICE_KIND_SELECTORS.nic)).toBe(nic);
  });
});

describe('servesNvidiaGpus: whose driver root must carry NVIDIA\'s user space', () => {
  it.each([
    { what: 'the gpu kind', selector: DEVICE_KIND_SELECTORS.gpu, serves: true },
    { what: 'NVIDIA\'s vendor among others (DEVICE_VENDORS)', selector: { vendors: ['0x1002', '0x10de'], classPrefixes: ['0x0302'] }, serves: true },
    { what: 'the nic kind (Mellanox)', selector: DEVICE_KIND_SELECTORS.nic, serves: false },
    { what: 'a Realtek NIC (the dkms-nic preset)', selector: { vendors: ['0x10ec'], classPrefixes: ['0x0200'] }, serves: false },
  ])('$what: $serves', ({ selector, serves }) => {
    expect(servesNvidiaGpus(selector)).toBe(serves);
  });
});

describe('selectDevices', () => {
  it('never returns a virtual function, and everything it returns matches the selector', () => {
    const device = fc.record({
      vendor: fc.constantFrom('0x10de', '0x15b3', '0x8086'),
      classCode: fc.constantFrom('0x030200', '0x030000', '0x020000', '0x020700', '0x040300'),
      physicalFunction: fc.option(fc.constant('0000:01:00.0'), { nil: undefined }),
    });
    fc.assert(
      fc.property(fc.array(device), fc.constantFrom<'gpu' | 'nic'>('gpu', 'nic'), (specs, kind) => {
        const devices = specs.map((s) => aDevice(s));
        const selected = selectDevices(devices, DEVICE_KIND_SELECTORS[kind]);
        expect(selected.every((d) => d.physicalFunction === undefined)).toBe(true);
        expect(selected.every((d) => matchesSelector(d, DEVICE_KIND_SELECTORS[kind]))).toBe(true);
        const expected = devices.filter((d) => d.physicalFunction === undefined && matchesSelector(d, DEVICE_KIND_SELECTORS[kind]));
        expect(selected).toHaveLength(expected.length);
      }),
    );
  });
});

describe('normalizeHexId', () => {
  it.each([
    ['10DE', 4, '0x10de'],
    ['0x15b3', 4, '0x15b3'],
    ['302', 4, '0x0302'],
    ['0x030200', 6, '0x030200'],
    ['0x10de0', 4, undefined],
    ['nvidia', 4, undefined],
    ['', 4, undefined],
  ] as const)('%s (%d digits) → %s', (text, digits, expected) => {
    expect(normalizeHexId(text, digits)).toBe(expected);
  });
});
