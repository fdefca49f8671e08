import { describe, expect, it } from 'vitest';
import { installedHeadersKernel } from '../unit/agent/build/sample-driver.ts';
import { ensureR8168Modules } from './ensure-vendor-builds.ts';
import { modinfoField, vermagicRelease } from './vendor-modinfo.ts';

// Debian's r8168-dkms (non-free), a real DKMS NIC driver, through the agent's dkms recipe.
describe("Realtek r8168 through the agent's dkms recipe (Debian r8168-dkms)", () => {
  const kernel = installedHeadersKernel();

  it('builds r8168 for the headers kernel, with the package version and PCI aliases; the second call is a cache hit', async () => {
    const r8168 = await ensureR8168Modules(kernel);
    const path = r8168.files['r8168'];
    if (path === undefined) throw new Error(`no r8168.ko in ${r8168.dir}`);
    expect(Object.keys(r8168.files)).toEqual(['r8168']);
    expect(await vermagicRelease(path)).toBe(kernel);
    expect((await modinfoField(path, 'version'))[0]).toMatch(new RegExp(`^${r8168.packageVersion.replace(/-[^-]*$/, '').replaceAll('.', '\\.')}`));
    expect((await modinfoField(path, 'alias')).some((a) => a.startsWith('pci:v000010ECd00008168'))).toBe(true);
    expect(r8168.built.modules[0]?.srcversion).toMatch(/^[0-9A-F]{23}$/);

    const again = await ensureR8168Modules(kernel);
    expect(again.built.cacheHit).toBe(true);
    expect(again.built.cacheKey).toBe(r8168.built.cacheKey);
  });
});
