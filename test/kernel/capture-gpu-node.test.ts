import { cp, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuiltDriver } from '../../agent/build/built-driver.ts';
import { readPciDevices } from '../../agent/detect/read-pci-devices.ts';
import { readLoadedModule } from '../../shared/kmod/read-loaded-module.ts';
import { buildSampleDriver } from '../unit/agent/build/sample-driver.ts';
import { QEMU_GUEST_CAPTURE } from '../unit/agent/capture/captures.ts';
import { bootGuest, type Guest } from './harness/boot-guest.ts';
import { defaultCacheDir } from './harness/build-initramfs.ts';
import { shellQuote } from './harness/run-guest-scenario.ts';

/*
 * scripts/capture-gpu-node.sh run inside Debian's kernel under QEMU, on a real sysfs and procfs:
 * the guest has no GPU, so it captures the guest's virtio functions (--vendor 0x1af4) and the
 * sample driver's modules, loaded with insmod (--modules 'drsample_*'), the way it captures an
 * NVIDIA node's GPUs and nvidia* modules. The capture must read back, through the agent's own
 * readers, exactly what the guest shows live, and match the capture committed under
 * test/fixtures/captures/qemu-guest (which the unit tests run detection, the restart-only
 * decision and the version guard on). UPDATE_CAPTURE=1 replaces the committed one with this run's.
 */

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'capture-gpu-node.sh');
let guest: Guest;
let built: BuiltDriver;
let capture: string;

beforeAll(async () => {
  built = await buildSampleDriver('1.0.0', join(defaultCacheDir(), 'kernel-test-modules'));
  // A boot on the loaded shared machine can take longer than the default limit; this bound only catches a hang.
  guest = await bootGuest({ bootTimeoutMs: 300_000 });
  capture = join(guest.workDir, 'capture');
  const ko = (name: string) => built.modules.find((m) => m.name === name)?.path ?? '';
  const load = await guest.run(`insmod ${shellQuote(ko('drsample_core'))} && insmod ${shellQuote(ko('drsample_net'))}`);
  expect(load.exitCode, load.stderr).toBe(0);
});
afterAll(async () => {
  await guest.stop();
});

describe('capture-gpu-node.sh in a QEMU guest', () => {
  let run: Awaited<ReturnType<Guest['run']>>;
  let live: string;
  beforeAll(async () => {
    // What the guest shows live, for the same functions and modules, read with cat and readlink.
    const shown = await guest.run(
      'for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor)" = 0x1af4 ] || continue; ' +
        'echo "$(basename $d) $(cat $d/vendor) $(cat $d/device) $(cat $d/class) $(basename "$(readlink $d/driver)")"; done; ' +
        'for m in drsample_core drsample_net; do echo "$m $(cat /sys/module/$m/srcversion) $(cat /sys/module/$m/version) $(ls /sys/module/$m/holders | tr "\\n" " ")"; done',
    );
    expect(shown.exitCode, shown.stderr).toBe(0);
    live = shown.stdout;
    run = await guest.run(`sh ${shellQuote(SCRIPT)} --vendor 0x1af4 --modules 'drsample_*' ${shellQuote(capture)}`);
  });

  it('runs to the end and says what it took and what the guest lacks', async () => {
    expect(run.exitCode, run.stderr).toBe(0);
    const summary = await readFile(join(capture, 'capture.txt'), 'utf8');
    expect(summary).toContain(`kernel=${guest.kernel.version}\n`);
    expect(summary).toContain('loaded_modules=2\n');
    expect(summary).toContain('absent=/proc/driver/nvidia nvidia-smi\n');
    expect(run.stderr).toMatch(/^capture-gpu-node: \d+ PCI function\(s\), 2 module\(s\) into /);
  });

  it("reads back through the agent's PCI reader as the guest shows its functions live", async () => {
    const devices = await readPciDevices(join(capture, 'sys'));
    const liveDevices = live.split('\n').filter((l) => /^[0-9a-f]{4}:/.test(l));
    expect(devices.length).toBeGreaterThan(0);
    expect(devices.map((d) => `${d.address} ${d.vendor} ${d.device} ${d.classCode} ${d.driver ?? ''}`)).toEqual(liveDevices);
  });

  it("reads back through the agent's module reader as /sys/module shows the loaded modules, built srcversions included", async () => {
    const sysModule = join(capture, 'sys', 'module');
    for (const m of built.modules) {
      const loaded = await readLoadedModule(sysModule, m.name);
      expect(loaded?.srcversion).toBe(m.srcversion);
      expect(live).toContain(`${m.name} ${m.srcversion ?? ''} ${loaded?.version ?? ''} ${loaded?.holders.map((h) => `${h} `).join('') ?? ''}`);
    }
    expect(await readdir(sysModule)).toEqual(['drsample_core', 'drsample_net']);
  });

  it('matches the capture committed for the unit tests (same functions, drivers and modules)', async () => {
    if (process.env['UPDATE_CAPTURE'] === '1') {
      await rm(QEMU_GUEST_CAPTURE, { recursive: true, force: true });
      await cp(capture, QEMU_GUEST_CAPTURE, { recursive: true, verbatimSymlinks: true });
    }
    const describe = async (root: string) => ({
      devices: (await readPciDevices(join(root, 'sys'))).map((d) => [d.address, d.vendor, d.device, d.classCode, d.driver]),
      modules: await Promise.all(['drsample_core', 'drsample_net'].map(async (m) => {
        const loaded = await readLoadedModule(join(root, 'sys', 'module'), m);
        return [m, loaded?.srcversion, loaded?.version, loaded?.holders];
      })),
    });
    expect(await describe(QEMU_GUEST_CAPTURE)).toEqual(await describe(capture));
  });
});
