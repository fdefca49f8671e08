import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readPciDevices } from '../../../../agent/detect/read-pci-devices.ts';
import { aSysfsTree, type FixtureFunction } from '../../../fixtures/sysfs/sysfs-tree.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pci-prop-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const hex = (digits: number) => fc.integer({ min: 0, max: 16 ** digits - 1 }).map((n) => `0x${n.toString(16).padStart(digits, '0')}`);
const ifname = fc.stringMatching(/^[a-z][a-z0-9]{1,10}$/);

/** A physical function on bus `bus` with up to 5 VFs on the same device (functions .1 to .6). */
const aFunction = (bus: number): fc.Arbitrary<FixtureFunction> =>
  fc
    .record({
      vendor: hex(4),
      device: hex(4),
      classCode: hex(6),
      driver: fc.option(fc.constantFrom('nvidia', 'nouveau', 'mlx5_core', 'igb'), { nil: undefined }),
      numaNode: fc.option(fc.integer({ min: 0, max: 7 }), { nil: undefined }),
      netInterfaces: fc.uniqueArray(ifname, { maxLength: 2 }),
      vfs: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
    })
    .map((r) => {
      const address = `0000:${bus.toString(16).padStart(2, '0')}:00.0`;
      const base = { address, vendor: r.vendor, device: r.device, classCode: r.classCode, netInterfaces: r.netInterfaces };
      const fn: FixtureFunction = {
        ...base,
        ...(r.driver === undefined ? {} : { driver: r.driver }),
        ...(r.numaNode === undefined ? {} : { numaNode: r.numaNode }),
        ...(r.vfs === undefined
          ? {}
          : {
              sriov: {
                totalVfs: 8,
                vfs: Array.from({ length: r.vfs }, (_, i) => ({ ...base, address: `${address.slice(0, -1)}${i + 1}`, netInterfaces: [] })),
              },
            }),
      };
      return fn;
    });

describe('readPciDevices', () => {
  it('reads back exactly what a sysfs-shaped tree holds, whatever the functions', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.integer({ min: 1, max: 254 }), { maxLength: 6 }).chain((buses) => fc.tuple(...buses.map(aFunction))),
        async (functions) => {
          const root = await aSysfsTree().with(...functions).writeTo(join(dir, `t${++run}`));
          const read = await readPciDevices(root);
          const pfs = read.filter((d) => d.physicalFunction === undefined);
          expect(pfs.map((d) => d.address)).toEqual(functions.map((f) => f.address).sort());
          for (const f of functions) {
            const d = pfs.find((p) => p.address === f.address);
            expect(d).toMatchObject({ vendor: f.vendor, device: f.device, classCode: f.classCode, driver: f.driver, numaNode: f.numaNode });
            expect(d?.netInterfaces).toEqual([...(f.netInterfaces ?? [])].sort());
            expect(d?.sriov?.virtualFunctions).toEqual(f.sriov?.vfs.map((v) => v.address));
            for (const vf of f.sriov?.vfs ?? []) expect(read.find((r) => r.address === vf.address)?.physicalFunction).toBe(f.address);
          }
          expect(read).toHaveLength(functions.reduce((n, f) => n + 1 + (f.sriov?.vfs.length ?? 0), 0));
        },
      ),
      { numRuns: 30 },
    );
  });
});
