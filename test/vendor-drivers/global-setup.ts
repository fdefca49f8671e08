import { installedHeadersKernel } from '../unit/agent/build/sample-driver.ts';
import { ensureDkmsPairModules, ensureNvidiaOpenModules, ensureR8168Modules, ensureVendorPackages } from './ensure-vendor-builds.ts';

/**
 * Fetches the vendor packages (scripts/ensure-vendor-packages.sh: apt sources for contrib,
 * non-free and non-free-firmware, dkms) and builds every vendor driver once with the agent's dkms
 * recipe into the cache, so the tests find it warm. Cold: about 20 CPU-minutes for NVIDIA.
 */
export async function setup(): Promise<void> {
  const kernel = installedHeadersKernel();
  await ensureVendorPackages();
  for (const [name, ensure] of [['dkms-pair fixture', ensureDkmsPairModules], ['r8168', ensureR8168Modules], ['NVIDIA open', ensureNvidiaOpenModules]] as const) {
    const started = Date.now();
    const built = await ensure(kernel);
    process.stderr.write(`[vendor-drivers] ${name} for ${kernel}: ${built.built.cacheHit ? 'cached' : 'built'} in ${Math.round((Date.now() - started) / 1000)} s\n`);
  }
}
