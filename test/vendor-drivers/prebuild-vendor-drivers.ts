import { ensureDkmsPairModules, ensureNvidiaModules, ensureR8168Modules } from './ensure-vendor-builds.ts';

/**
 * Builds every vendor driver for one kernel into the vendor cache (a warm cache returns at once):
 *   node test/vendor-drivers/prebuild-vendor-drivers.ts <kernel release>
 * The vendor-drivers global setup runs it under `nice` in the background, so the ~20 CPU-minute
 * NVIDIA build overlaps the other test projects without slowing them.
 */
const kernel = process.argv[2];
if (kernel === undefined) throw new Error('usage: prebuild-vendor-drivers.ts <kernel release>');
for (const [name, ensure] of [['dkms-pair fixture', ensureDkmsPairModules], ['r8168', ensureR8168Modules], ['NVIDIA', ensureNvidiaModules]] as const) {
  const started = Date.now();
  const built = await ensure(kernel);
  process.stderr.write(`[vendor-drivers] ${name} for ${kernel}: ${built.built.cacheHit ? 'cached' : 'built'} in ${Math.round((Date.now() - started) / 1000)} s\n`);
}
