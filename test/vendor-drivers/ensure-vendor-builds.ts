import { readdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';

/**
 * Real vendor driver modules for the tests, built once per (package version, kernel) and cached
 * outside the repository (~/.cache/driver-rollout/vendor-builds/<package>_<version>/<kernel>/):
 * Debian's nvidia-open-kernel-dkms and r8168-dkms, fetched and unpacked without their maintainer
 * scripts by scripts/ensure-vendor-packages.sh and built with the real `dkms` in private trees by
 * test/vendor-drivers/dkms-build.sh. A cold NVIDIA build costs about 20 CPU-minutes; a warm
 * cache returns at once. Each call is safe to run from several test processes (the scripts lock).
 */

/** One cached build: the modules by name (as modinfo names them) and where they are. */
export interface VendorModules {
  /** The Debian package and version the sources came from, e.g. `r8168-dkms` `8.051.02-2`. */
  readonly packageName: string;
  readonly packageVersion: string;
  readonly kernelRelease: string;
  /** Directory holding the built .ko files. */
  readonly dir: string;
  /** Module name (`nvidia_uvm` style, as the kernel names it) to its .ko path. */
  readonly files: Readonly<Record<string, string>>;
}

export interface NvidiaOpenModules extends VendorModules {
  /** Upstream release (e.g. `535.261.03`): the firmware directory is `nvidia/<release>/`. */
  readonly release: string;
  /** The unpacked firmware-nvidia-gsp's firmware root: holds `nvidia/<release>/gsp_*.bin`. */
  readonly firmwareDir: string;
}

const here = import.meta.dirname;
const repoRoot = join(here, '..', '..');

/** The cache root the scripts use (DRIVER_ROLLOUT_CACHE or ~/.cache/driver-rollout). */
export function vendorCacheRoot(): string {
  return process.env['DRIVER_ROLLOUT_CACHE'] ?? join(homedir(), '.cache', 'driver-rollout');
}

type VendorPackages = ReadonlyMap<string, { dir: string; version: string }>;
let packagesOnce: Promise<VendorPackages> | undefined;

/**
 * Runs scripts/ensure-vendor-packages.sh once per process: package name to its unpacked
 * directory (`<dir>/root` is the package's `/`) and Debian version.
 */
export async function ensureVendorPackages(): Promise<VendorPackages> {
  packagesOnce ??= runEnsureVendorPackages();
  return packagesOnce;
}

async function runEnsureVendorPackages(): Promise<VendorPackages> {
  const result = await execa('bash', [join(repoRoot, 'scripts', 'ensure-vendor-packages.sh')], { stderr: 'inherit' });
  const packages = new Map<string, { dir: string; version: string }>();
  for (const line of result.stdout.split('\n')) {
    const [name, dir] = line.trim().split(/\s+/);
    if (name === undefined || dir === undefined) continue;
    const version = dir.slice(dir.lastIndexOf('/') + 1).slice(name.length + 1);
    packages.set(name, { dir, version });
  }
  return packages;
}

async function ensureDkmsBuild(packageName: string, kernelRelease: string): Promise<VendorModules> {
  const pkg = (await ensureVendorPackages()).get(packageName);
  if (pkg === undefined) throw new Error(`scripts/ensure-vendor-packages.sh did not provide ${packageName}`);
  const out = join(vendorCacheRoot(), 'vendor-builds', `${packageName}_${pkg.version}`, kernelRelease);
  await execa('bash', [join(here, 'dkms-build.sh'), join(pkg.dir, 'root'), kernelRelease, out], { stderr: 'inherit' });
  const dir = join(out, 'modules');
  const files: Record<string, string> = {};
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.ko')).sort()) {
    const path = join(dir, file);
    const name = (await execa('modinfo', ['-F', 'name', path])).stdout.trim().replaceAll('-', '_');
    files[name] = path;
  }
  return { packageName, packageVersion: pkg.version, kernelRelease, dir, files };
}

/** Realtek's r8168 (Debian r8168-dkms, non-free) built with dkms: one module, `r8168`. */
export async function ensureR8168Modules(kernelRelease: string): Promise<VendorModules> {
  return ensureDkmsBuild('r8168-dkms', kernelRelease);
}

/**
 * NVIDIA's open GPU kernel modules (Debian nvidia-open-kernel-dkms, contrib) built with dkms:
 * nvidia, nvidia_uvm, nvidia_modeset, nvidia_drm, nvidia_peermem (a stub without MOFED), plus the
 * GSP firmware of the same release (firmware-nvidia-gsp, non-free-firmware).
 */
export async function ensureNvidiaOpenModules(kernelRelease: string): Promise<NvidiaOpenModules> {
  const built = await ensureDkmsBuild('nvidia-open-kernel-dkms', kernelRelease);
  const firmware = (await ensureVendorPackages()).get('firmware-nvidia-gsp');
  if (firmware === undefined) throw new Error('scripts/ensure-vendor-packages.sh did not provide firmware-nvidia-gsp');
  const release = built.packageVersion.replace(/-[^-]*$/, '');
  return { ...built, release, firmwareDir: join(firmware.dir, 'root', 'lib', 'firmware') };
}
