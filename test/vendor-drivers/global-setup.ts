import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { installedHeadersKernel } from '../unit/agent/build/sample-driver.ts';
import { ensureVendorPackages, vendorModuleCache } from './ensure-vendor-builds.ts';

/**
 * Fetches the vendor packages (scripts/ensure-vendor-packages.sh: apt sources for contrib,
 * non-free and non-free-firmware, dkms), then starts building every vendor driver with the agent's
 * recipes under `nice -n 10`, detached (cold: ~20 CPU-minutes for NVIDIA's open modules, built
 * for their own kernel, see nvidiaTestKernel), so the build overlaps
 * the other projects' tests without slowing them. Tests that need a driver call its ensure*
 * function, which waits on the same per-driver lock and then finds the cache warm. A run that
 * needs no NVIDIA test does not wait for it: the build goes on in the background and fills the
 * cache for the next run. Its output goes to <vendor cache>/prebuild.log, never to the test
 * run's stdout (a pipe it held open would keep `npm test | tee` waiting for the build).
 */
export async function setup(): Promise<void> {
  await ensureVendorPackages();
  mkdirSync(vendorModuleCache(), { recursive: true });
  const logPath = join(vendorModuleCache(), 'prebuild.log');
  const log = openSync(logPath, 'a');
  try {
    const child = spawn('nice', ['-n', '10', process.execPath, join(import.meta.dirname, 'prebuild-vendor-drivers.ts'), installedHeadersKernel()], {
      stdio: ['ignore', log, log],
      detached: true,
    });
    child.unref();
  } finally {
    closeSync(log);
  }
  process.stderr.write(`[vendor-drivers] building vendor drivers in the background (nice 10); log: ${logPath}\n`);
}
