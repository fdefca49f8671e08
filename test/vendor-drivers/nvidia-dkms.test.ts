import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { installedHeadersKernel } from '../unit/agent/build/sample-driver.ts';
import { ensureNvidiaModules, type NvidiaModules } from './ensure-vendor-builds.ts';
import { modinfoField, vermagicRelease } from './vendor-modinfo.ts';

// Debian's nvidia-kernel-dkms (non-free; NVIDIA's GPU kernel modules in their proprietary flavour,
// 535.309.01 from bookworm-security), built by the agent's dkms recipe with the real dkms against
// the installed Debian headers; the global setup starts the build in the background.
//
// Not the open flavour: Debian bookworm's nvidia-open-kernel-dkms 535.261.03-1 (contrib, the only
// version the mirror serves) does not compile against bookworm's 6.1.0-56 headers:
//   nvidia/nv-pci.c:223: error: too few arguments to function 'pci_resize_resource'
// (Debian's kernel backported the pci_resize_resource API change; the open package was not updated
// in bookworm-security). When Debian ships an open package that builds, switch
// scripts/ensure-vendor-packages.sh and ensureNvidiaModules back to it; these checks stay the same.
describe("NVIDIA GPU modules through the agent's dkms recipe (Debian nvidia-kernel-dkms)", () => {
  const kernel = installedHeadersKernel();
  let nvidia: NvidiaModules;

  beforeAll(async () => {
    nvidia = await ensureNvidiaModules(kernel);
  });

  it('builds nvidia, nvidia_uvm, nvidia_modeset and nvidia_drm (and nvidia_peermem) for the headers kernel, at the package release', async () => {
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
    }
    expect(nvidia.built.modules.find((m) => m.name === 'nvidia_uvm')?.dependsOn).toContain('nvidia');
    expect(nvidia.built.modules.find((m) => m.name === 'nvidia_modeset')?.dependsOn).toContain('nvidia');
    expect(nvidia.built.modules.find((m) => m.name === 'nvidia_drm')?.dependsOn).toEqual(expect.arrayContaining(['drm', 'drm_kms_helper', 'nvidia_modeset']));
  });

  it('declares GSP firmware nvidia/<release>/gsp_*.bin, present in the unpacked firmware-nvidia-gsp of the same release', async () => {
    const path = nvidia.files['nvidia'];
    if (path === undefined) throw new Error('no nvidia.ko');
    const firmware = await modinfoField(path, 'firmware');
    expect(firmware.length).toBeGreaterThan(0);
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
