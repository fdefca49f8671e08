import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { BuiltDriver } from '../../../../agent/build/built-driver.ts';
import { detectNode, hasDevices } from '../../../../agent/detect/detect-node.ts';
import { DEVICE_KIND_SELECTORS } from '../../../../agent/detect/device-selector.ts';
import { fixedHostInfo } from '../../../../agent/detect/host-info.ts';
import { decideReload } from '../../../../agent/kernel/plan/decide-reload.ts';
import { describeUserSpaceMismatch, judgeUserSpace } from '../../../../agent/user-space/plan/judge-user-space.ts';
import type { LoadedModule } from '../../../../shared/kmod/loaded-module.ts';
import { readLoadedModule } from '../../../../shared/kmod/read-loaded-module.ts';
import { buildSampleDriver } from '../build/sample-driver.ts';
import { debianLibraryReadings } from '../user-space/debian-layout.ts';
import { QEMU_GUEST_CAPTURE } from './captures.ts';
import { defaultCacheDir } from '../../../kernel/harness/build-initramfs.ts';

// The agent's detection, its restart-only (fast path) decision and the version guard's verdict on
// a CAPTURE made by scripts/capture-gpu-node.sh inside Debian's kernel under QEMU
// (test/fixtures/captures/qemu-guest, made and checked by test/kernel/capture-gpu-node.test.ts):
// its virtio functions (the 9p shares) and the sample driver 1.0.0 loaded, no GPU. A capture from a real GPU node
// goes beside it and runs through the same readers.

const sysfsRoot = join(QEMU_GUEST_CAPTURE, 'sys');
const host = fixedHostInfo({ kernelRelease: '6.1.0-56-amd64', distro: 'debian', distroRelease: '12', arch: 'x64' });
let v1: BuiltDriver;
let v2: BuiltDriver;
let loaded: Map<string, LoadedModule>;

beforeAll(async () => {
  const cacheDir = join(defaultCacheDir(), 'kernel-test-modules');
  v1 = await buildSampleDriver('1.0.0', cacheDir);
  v2 = await buildSampleDriver('2.0.0', cacheDir);
  loaded = new Map();
  for (const m of v1.modules) {
    const module = await readLoadedModule(join(sysfsRoot, 'module'), m.name);
    if (module !== undefined) loaded.set(m.name, module);
  }
}, 120_000);

describe('the QEMU guest capture', () => {
  it('detection: no GPU, so the gpu agent would report NoDevice', async () => {
    const detection = await detectNode({ sysfsRoot, selector: DEVICE_KIND_SELECTORS.gpu, hostInfo: host });
    expect(hasDevices(detection)).toBe(false);
  });

  it("detection: the guest's two virtio 9p transports (its shares), bound to virtio-pci, for a selector of theirs", async () => {
    const detection = await detectNode({ sysfsRoot, selector: { vendors: ['0x1af4'], classPrefixes: ['0x0002'] }, hostInfo: host });
    expect(detection.devices.map((d) => [d.address, d.device, d.driver])).toEqual([
      ['0000:00:03.0', '0x1009', 'virtio-pci'],
      ['0000:00:04.0', '0x1009', 'virtio-pci'],
    ]);
  });

  it('restart only: the loaded modules are the built 1.0.0 ones, so a restart changes nothing (fast path)', () => {
    expect([...loaded.keys()]).toEqual(['drsample_core', 'drsample_net']);
    expect(decideReload(v1.modules, ['drsample_core', 'drsample_net'], loaded, {})).toEqual({ kind: 'fast-path' });
  });

  it('a new version is a reload, naming the srcversions', () => {
    const decision = decideReload(v2.modules, ['drsample_core', 'drsample_net'], loaded, {});
    expect(decision).toMatchObject({ kind: 'load' });
    expect(decision.kind === 'load' ? decision.reason : '').toContain(`drsample_core srcversion ${loaded.get('drsample_core')?.srcversion ?? ''} is loaded, ${v2.modules[0]?.srcversion ?? ''} is built`);
  });

  it("the version guard's verdict: the loaded modules' version (1.0.0) against an image's 535.309.01 user space is a mismatch", () => {
    const modules = [...loaded.values()].map((m) => ({ name: m.name, what: `/sys/module/${m.name}/version`, version: m.version ?? '' }));
    const userSpace = [...debianLibraryReadings('535.309.01'), { name: 'nvidia-smi', what: '/usr/lib/nvidia/current/nvidia-smi', version: '535.309.01' }];
    const verdict = judgeUserSpace(modules, userSpace);
    expect(verdict).toMatchObject({ kind: 'mismatch', moduleVersions: ['1.0.0'] });
    if (verdict.kind !== 'mismatch') throw new Error('not a mismatch');
    expect(describeUserSpaceMismatch(verdict)).toMatch(/^modules 1\.0\.0, user space 535\.309\.01 \(/);
  });
});
