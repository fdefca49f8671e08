import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { lock } from 'proper-lockfile';
import { buildDriver } from '../../agent/build/build-driver.ts';
import { buildFlavourModules, driverRolloutCache, fetchVendorPackages, flavourModuleCache } from '../../drivers/build-flavour-modules.ts';
import { driverFlavour } from '../../drivers/flavours.ts';
import type { DkmsPackage } from '../../agent/build/build-recipe.ts';
import type { BuiltDriver } from '../../agent/build/built-driver.ts';

/**
 * Real vendor driver modules for the tests, built by the agent's own `dkms` recipe (buildDriver)
 * and kept in the agent's module cache outside the repository
 * (~/.cache/driver-rollout/vendor-agent-cache/<kernel>/<cache key>/): Debian's
 * nvidia-open-kernel-dkms and r8168-dkms, fetched and unpacked without their maintainer scripts by
 * scripts/ensure-vendor-packages.sh, and test/fixtures/dkms-pair. A cold NVIDIA build costs about
 * 20 CPU-minutes; a warm cache returns in seconds. Builds of one driver are serialized across test
 * processes by a lock file, so the second caller finds the cache warm.
 */

/** One driver's modules, by the kernel's module name, from the agent's cache. */
export interface VendorModules {
  /** The Debian package and version the sources came from (`test/fixtures/dkms-pair` `1.0` for the fixture). */
  readonly packageName: string;
  readonly packageVersion: string;
  readonly kernelRelease: string;
  /** The sources handed to the dkms recipe (the agent's DRIVER_SOURCE_DIR) and its packages there (BUILD_RECIPE's). */
  readonly sourceDir: string;
  readonly packages: readonly DkmsPackage[];
  /** The cache entry's directory: holds `<module name>.ko` files and manifest.json. */
  readonly dir: string;
  /** Module name (`nvidia_uvm` style, as the kernel names it) to its .ko path. */
  readonly files: Readonly<Record<string, string>>;
  /** What buildDriver returned (cacheHit, durationMs, srcversions...). */
  readonly built: BuiltDriver;
}

export interface NvidiaModules extends VendorModules {
  /** Upstream release (e.g. `535.261.03`): the firmware directory is `nvidia/<release>/`. */
  readonly release: string;
  /** The unpacked firmware-nvidia-gsp's firmware root: holds `nvidia/<release>/gsp_*.bin`. */
  readonly firmwareDir: string;
}

const repoRoot = join(import.meta.dirname, '..', '..');
/** The two-package DKMS fixture (MOFED's layout: drpair-user builds against drpair-base). */
export const DKMS_PAIR_DIR = join(repoRoot, 'test', 'fixtures', 'dkms-pair');

/** The cache root the scripts use (DRIVER_ROLLOUT_CACHE or ~/.cache/driver-rollout). */
export const vendorCacheRoot = driverRolloutCache;

/** The agent module cache the vendor builds live in (the driver images' prebuilt modules come from it too). */
export const vendorModuleCache = flavourModuleCache;

type VendorPackages = ReadonlyMap<string, { dir: string; version: string }>;

/**
 * scripts/ensure-vendor-packages.sh, once per process (drivers/build-flavour-modules.ts):
 * package name to its unpacked directory (`<dir>/root` is the package's `/`) and Debian version;
 * of a package fetched at two versions (the GSP firmware of each NVIDIA release), the first.
 */
export async function ensureVendorPackages(): Promise<VendorPackages> {
  const packages = new Map<string, { dir: string; version: string }>();
  for (const p of await fetchVendorPackages()) if (!packages.has(p.name)) packages.set(p.name, { dir: p.dir, version: p.version });
  return packages;
}

interface DkmsBuildSpec {
  readonly driver: string;
  readonly packageName: string;
  readonly packageVersion: string;
  readonly sourceDir: string;
  readonly packages: readonly DkmsPackage[];
  readonly kernelRelease: string;
}

/** buildDriver with the dkms recipe into the vendor cache, one builder per driver at a time. */
async function buildWithDkms(spec: DkmsBuildSpec): Promise<VendorModules> {
  const cacheDir = vendorModuleCache();
  await mkdir(cacheDir, { recursive: true });
  const release = await lock(cacheDir, { lockfilePath: join(cacheDir, `.${spec.driver}.lock`), retries: { retries: 2000, minTimeout: 2000, maxTimeout: 5000 }, stale: 60_000 });
  try {
    const built = await buildDriver({
      driver: spec.driver,
      version: spec.packageVersion,
      kernelVersion: spec.kernelRelease,
      source: { kind: 'directory', path: spec.sourceDir },
      cacheDir,
      recipe: { kind: 'dkms', packages: spec.packages },
      logger: pino({ level: 'silent' }),
    });
    const files = Object.fromEntries(built.modules.map((m) => [m.name, m.path]));
    const dir = built.modules[0]?.path.replace(/\/[^/]+$/, '') ?? cacheDir;
    return { packageName: spec.packageName, packageVersion: spec.packageVersion, kernelRelease: spec.kernelRelease, sourceDir: spec.sourceDir, packages: spec.packages, dir, files, built };
  } finally {
    await release();
  }
}

/** A flavour's modules (drivers/flavours.ts) as the vendor tests describe them. */
async function flavourModules(name: string, kernelRelease: string): Promise<VendorModules & { readonly firmwareDir: string | undefined }> {
  const built = await buildFlavourModules(driverFlavour(name), kernelRelease);
  const { flavour } = built;
  const dir = built.built.modules[0]?.path.replace(/\/[^/]+$/, '') ?? flavourModuleCache();
  return {
    packageName: flavour.sourcePackage.name,
    packageVersion: flavour.sourcePackage.version,
    kernelRelease,
    sourceDir: built.sourceDir,
    packages: [{ directory: flavour.dkmsDirectory, variables: {} }],
    dir,
    files: built.files,
    built: built.built,
    firmwareDir: built.firmwareDir,
  };
}

/** Realtek's r8168 (Debian r8168-dkms, non-free; the `dkms-nic` flavour) through the agent's dkms recipe: one module, `r8168`. */
export async function ensureR8168Modules(kernelRelease: string): Promise<VendorModules> {
  return flavourModules('dkms-nic', kernelRelease);
}

/**
 * The kernel release NVIDIA's open modules are built for: the one linux-image-<release> package
 * scripts/ensure-vendor-packages.sh fetches (unpacked, depmod'ed, never installed; its headers
 * are installed). Not the newest installed headers: Debian's nvidia-open-kernel-dkms
 * 535.261.03-1 (bookworm's only open package) does not compile against 6.1.0-56, whose
 * pci_resize_resource takes a fourth argument Debian backported
 * (nvidia/nv-pci.c:223: too few arguments to function 'pci_resize_resource'); 6.1.0-50 still has
 * the three-argument form.
 */
export async function nvidiaTestKernel(): Promise<{ release: string; root: string; packageVersion: string }> {
  const images = [...(await ensureVendorPackages()).entries()].filter(([name]) => name.startsWith('linux-image-'));
  const [image, ...more] = images;
  if (image === undefined || more.length > 0) throw new Error(`scripts/ensure-vendor-packages.sh should provide one linux-image-* package, provided: ${images.map(([n]) => n).join(', ') || 'none'}`);
  const [name, { dir, version }] = image;
  return { release: name.slice('linux-image-'.length), root: join(dir, 'root'), packageVersion: version };
}

/**
 * NVIDIA's OPEN GPU kernel modules (Debian nvidia-open-kernel-dkms 535.261.03-1, contrib) through
 * the agent's dkms recipe, for nvidiaTestKernel() unless told otherwise: nvidia, nvidia_uvm,
 * nvidia_modeset, nvidia_drm and nvidia_peermem, plus the GSP firmware of the same release
 * (firmware-nvidia-gsp 535.261.03-1, non-free-firmware; both pinned, and
 * scripts/ensure-vendor-packages.sh checks the two releases agree). The open modules need that
 * firmware on a real GPU.
 */
export async function ensureNvidiaModules(kernelRelease?: string): Promise<NvidiaModules> {
  return nvidiaModules('nvidia-open', kernelRelease ?? (await nvidiaTestKernel()).release);
}

/**
 * NVIDIA's proprietary modules (Debian nvidia-kernel-dkms 535.309.01, bookworm-security; the
 * `nvidia` flavour), for the newest bookworm kernel ABI they build on (PROPRIETARY_KERNEL).
 */
export async function ensureNvidiaProprietaryModules(kernelRelease: string = PROPRIETARY_KERNEL): Promise<NvidiaModules> {
  return nvidiaModules('nvidia', kernelRelease);
}

/** The kernel the proprietary flavour's image carries modules for. */
export const PROPRIETARY_KERNEL = driverFlavour('nvidia').prebuiltKernels[0] ?? '6.1.0-56-amd64';

async function nvidiaModules(flavour: 'nvidia' | 'nvidia-open', kernelRelease: string): Promise<NvidiaModules> {
  const built = await flavourModules(flavour, kernelRelease);
  if (built.firmwareDir === undefined) throw new Error(`flavour ${flavour} has no firmware package`);
  return { ...built, release: nvidiaRelease(built.packageVersion), firmwareDir: built.firmwareDir };
}

/** The upstream release of a Debian version: `535.309.01-0+deb12u1` is `535.309.01`. */
export function nvidiaRelease(debianVersion: string): string {
  return debianVersion.replace(/^\d+:/, '').replace(/-[^-]*$/, '');
}

/** The two-package fixture through the dkms recipe: drpair_base, then drpair_user built against it. */
export const DKMS_PAIR_PACKAGES: readonly DkmsPackage[] = [
  { directory: 'drpair-base', variables: {} },
  { directory: 'drpair-user', variables: { DRPAIR_BASE_DIR: '{built:drpair-base}' } },
];

export async function ensureDkmsPairModules(kernelRelease: string): Promise<VendorModules> {
  return buildWithDkms({ driver: 'drpair', packageName: 'test/fixtures/dkms-pair', packageVersion: '1.0', sourceDir: DKMS_PAIR_DIR, packages: DKMS_PAIR_PACKAGES, kernelRelease });
}
