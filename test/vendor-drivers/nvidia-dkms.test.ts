import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNvidiaModules, nvidiaTestKernel, type NvidiaModules } from './ensure-vendor-builds.ts';
import { modinfoField, vermagicRelease } from './vendor-modinfo.ts';

// Debian's nvidia-open-kernel-dkms 535.261.03-1 (contrib; NVIDIA's OPEN GPU kernel modules),
// built by the agent's dkms recipe with the real dkms against the installed headers of the
// kernel scripts/ensure-vendor-packages.sh fetches (linux-image-6.1.0-50-amd64); the global setup
// starts the build in the background.
//
// Not the newest installed headers (6.1.0-56): Debian backported the four-argument
// pci_resize_resource there, and 535.261.03 (bookworm's only open package) predates it:
//   nvidia/nv-pci.c:223: error: too few arguments to function 'pci_resize_resource'
// 6.1.0-50's include/linux/pci.h has the three-argument form. No test builds it for 6.1.0-56 to
// see the CompileFailed: a failed build is not cached, and reaching nv-pci.c costs the whole
// conftest phase (385 compile tests, over a third of the cold build's CPU) on every run.
describe("NVIDIA's open GPU modules through the agent's dkms recipe (Debian nvidia-open-kernel-dkms)", () => {
  let kernel: string;
  let nvidia: NvidiaModules;

  beforeAll(async () => {
    kernel = (await nvidiaTestKernel()).release;
    nvidia = await ensureNvidiaModules(kernel);
  });

  it('builds for the kernel the open package supports, 6.1.0-50-amd64, from the pinned package', () => {
    // The pins (scripts/ensure-vendor-packages.sh): a change there must be a change here too.
    expect(kernel).toBe('6.1.0-50-amd64');
    expect(nvidia.packageName).toBe('nvidia-open-kernel-dkms');
    expect(nvidia.packageVersion).toBe('535.261.03-1');
    expect(nvidia.release).toBe('535.261.03');
    expect(nvidia.packages).toEqual([{ directory: 'nvidia-current-open-535.261.03', variables: {} }]);
  });

  it('builds nvidia, nvidia_uvm, nvidia_modeset and nvidia_drm (and nvidia_peermem) with that kernel\'s vermagic, at the package release', async () => {
    expect(nvidia.release).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Object.keys(nvidia.files)).toEqual(expect.arrayContaining(['nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm']));
    expect(Object.keys(nvidia.files).filter((m) => !['nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm'].includes(m))).toEqual(
      Object.keys(nvidia.files).includes('nvidia_peermem') ? ['nvidia_peermem'] : [],
    );
    for (const [name, path] of Object.entries(nvidia.files)) {
      expect(await vermagicRelease(path), name).toBe(kernel);
      expect((await modinfoField(path, 'srcversion'))[0], name).toMatch(/^[0-9A-F]{23}$/);
    }
    for (const name of ['nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm']) {
      expect(await modinfoField(nvidia.files[name] ?? '', 'version'), name).toEqual([nvidia.release]);
      // The open flavour's license; the proprietary modules say `NVIDIA`.
      expect(await modinfoField(nvidia.files[name] ?? '', 'license'), name).toEqual(['Dual MIT/GPL']);
    }
    expect(nvidia.built.modules.find((m) => m.name === 'nvidia_uvm')?.dependsOn).toContain('nvidia');
    expect(nvidia.built.modules.find((m) => m.name === 'nvidia_modeset')?.dependsOn).toContain('nvidia');
    expect(nvidia.built.modules.find((m) => m.name === 'nvidia_drm')?.dependsOn).toEqual(expect.arrayContaining(['drm', 'drm_kms_helper', 'nvidia_modeset']));
  });

  it('declares GSP firmware nvidia/<release>/gsp_*.bin, present in the unpacked firmware-nvidia-gsp of the same release (pinned 535.261.03-1)', async () => {
    const path = nvidia.files['nvidia'];
    if (path === undefined) throw new Error('no nvidia.ko');
    const firmware = await modinfoField(path, 'firmware');
    expect([...firmware].sort()).toEqual([`nvidia/${nvidia.release}/gsp_ga10x.bin`, `nvidia/${nvidia.release}/gsp_tu10x.bin`]);
    for (const file of firmware) {
      expect(file).toMatch(new RegExp(`^nvidia/${nvidia.release.replaceAll('.', '\\.')}/gsp_\\w+\\.bin$`));
      await expect(access(join(nvidia.firmwareDir, file))).resolves.toBeUndefined();
    }
  });

  it('a second call with the same inputs is a cache hit with the same modules', async () => {
    const again = await ensureNvidiaModules(kernel);
    expect(again.built.cacheHit).toBe(true);
    expect(again.built.cacheKey).toBe(nvidia.built.cacheKey);
    expect(again.built.modules.map((m) => m.srcversion)).toEqual(nvidia.built.modules.map((m) => m.srcversion));
  });
});
