import { ensureDkmsPairModules, ensureNvidiaModules, ensureNvidiaProprietaryModules, ensureR8168Modules, nvidiaTestKernel, PROPRIETARY_KERNEL } from './ensure-vendor-builds.ts';

/**
 * Builds every vendor driver into the vendor cache (a warm cache returns at once):
 *   node test/vendor-drivers/prebuild-vendor-drivers.ts <kernel release>
 * The dkms-pair fixture and r8168 for <kernel release> (the newest installed headers); NVIDIA's
 * open modules for their own kernel (nvidiaTestKernel(): bookworm's open package does not build
 * for the newest ABI) and the proprietary ones for PROPRIETARY_KERNEL: the two NVIDIA builds a
 * cold run pays, shared with the driver images' prebuilt modules (drivers/build-flavour-modules.ts). The vendor-drivers global setup runs it
 * under `nice` in the background, so the ~20 CPU-minute NVIDIA build overlaps the other test
 * projects without slowing them.
 */
const kernel = process.argv[2];
if (kernel === undefined) throw new Error('usage: prebuild-vendor-drivers.ts <kernel release>');
const nvidiaKernel = (await nvidiaTestKernel()).release;
for (const [name, release, ensure] of [
  ['dkms-pair fixture', kernel, ensureDkmsPairModules],
  ['r8168', kernel, ensureR8168Modules],
  ['NVIDIA (open)', nvidiaKernel, ensureNvidiaModules],
  ['NVIDIA (proprietary)', PROPRIETARY_KERNEL, ensureNvidiaProprietaryModules],
] as const) {
  const started = Date.now();
  const built = await ensure(release);
  process.stderr.write(`[vendor-drivers] ${name} for ${release}: ${built.built.cacheHit ? 'cached' : 'built'} in ${Math.round((Date.now() - started) / 1000)} s\n`);
}
