/**
 * The agent's own work on a node: detecting the devices it serves in a DGX-like sysfs fixture
 * (8 H100 GPUs, 8 ConnectX-7 NICs with 4 VFs each), and building the sample driver's modules with
 * kbuild for the installed headers, cold (empty cache) and cached.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { detectNode } from '../../agent/detect/detect-node.ts';
import { DEVICE_KIND_SELECTORS } from '../../agent/detect/device-selector.ts';
import { systemHostInfo } from '../../agent/detect/host-info.ts';
import { readPciDevices } from '../../agent/detect/read-pci-devices.ts';
import { aConnectX7, aSysfsTree, anH100 } from '../../test/fixtures/sysfs/sysfs-tree.ts';
import { buildSampleDriver } from '../../test/unit/agent/build/sample-driver.ts';
import type { Figure } from '../lib/results.ts';
import { spreadOf } from '../lib/stats.ts';

export async function agentFigures(runs: number): Promise<Figure[]> {
  const root = await mkdtemp(join(tmpdir(), 'driver-rollout-bench-agent-'));
  try {
    const hex = (i: number): string => i.toString(16).padStart(2, '0');
    const sysfs = await aSysfsTree()
      .with(...Array.from({ length: 8 }, (_, i) => anH100(`0000:${hex(0x18 + i * 0x10)}:00.0`, i < 4 ? 0 : 1)))
      .with(...Array.from({ length: 8 }, (_, i) => aConnectX7(`0000:${hex(0x19 + i * 0x10)}:00.0`, `ib${i}`, i < 4 ? 0 : 1, 4)))
      .writeTo(join(root, 'sys'));
    const detect = async (): Promise<number> => {
      const t0 = performance.now();
      const found = await detectNode({ sysfsRoot: sysfs, selector: DEVICE_KIND_SELECTORS.gpu, hostInfo: systemHostInfo() });
      if (found.devices.length !== 8) throw new Error(`expected 8 GPUs, detected ${found.devices.length}`);
      return performance.now() - t0;
    };
    const scan = async (): Promise<number> => {
      const t0 = performance.now();
      await readPciDevices(sysfs);
      return performance.now() - t0;
    };
    await detect();
    const detections: number[] = [];
    const scans: number[] = [];
    for (let i = 0; i < Math.max(runs, 20); i++) {
      detections.push(await detect());
      scans.push(await scan());
    }

    const cold: number[] = [];
    const cached: number[] = [];
    for (let i = 0; i < Math.min(runs, 3); i++) {
      const cacheDir = join(root, `cache-${i}`);
      const built = await buildSampleDriver('1.0.0', cacheDir);
      if (built.cacheHit) throw new Error('a fresh cache hit');
      cold.push(built.durationMs / 1000);
      for (let j = 0; j < 2; j++) {
        const again = await buildSampleDriver('1.0.0', cacheDir);
        if (!again.cacheHit) throw new Error('the second build missed the cache');
        cached.push(again.durationMs);
      }
    }
    return [
      { name: 'agent: detect (PCI scan + host info), 8-GPU + 8-NIC (32 VFs) sysfs fixture', unit: 'ms', spread: spreadOf(detections) },
      { name: 'agent: PCI scan alone, same fixture (host info: uname + systeminformation osInfo, spawns processes)', unit: 'ms', spread: spreadOf(scans) },
      { name: 'agent: build sample driver modules with kbuild, cold cache', unit: 's', spread: spreadOf(cold) },
      { name: 'agent: build sample driver modules, cached (verify + reuse)', unit: 'ms', spread: spreadOf(cached) },
    ];
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
