import { mkdir, readdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { pino } from 'pino';
import { lock } from 'proper-lockfile';
import { buildDriver } from '../agent/build/build-driver.ts';
import { pathExists } from '../shared/fs/if-exists.ts';
import type { BuiltDriver } from '../agent/build/built-driver.ts';
import { driverFlavour, type DriverFlavour } from './flavours.ts';

/**
 * A flavour's modules for one kernel, built by the agent's own `dkms` recipe (buildDriver, as the
 * agent builds on a node) from Debian's package, into the agent module cache under
 * `<cache>/vendor-agent-cache/` (DRIVER_ROLLOUT_CACHE, default ~/.cache/driver-rollout). The
 * driver images' prebuilt modules and the vendor-driver tests come from this one cache, so a cold
 * build is paid once per sources, kernel and compiler. Builds of one flavour are serialized across
 * processes by a lock file: the second caller finds the cache warm.
 *
 *   node drivers/build-flavour-modules.ts <flavour> <kernel release>
 */

export interface FlavourModules {
  readonly flavour: DriverFlavour;
  readonly kernelRelease: string;
  /** The unpacked package's /usr/src (the agent's DRIVER_SOURCE_DIR). */
  readonly sourceDir: string;
  /** Module name (`nvidia_uvm`, as the kernel names it) to its .ko in the cache. */
  readonly files: Readonly<Record<string, string>>;
  /** The unpacked firmware package's lib/firmware, when the flavour has one. */
  readonly firmwareDir: string | undefined;
  readonly built: BuiltDriver;
}

/** A Debian package fetched and unpacked (never installed): `<dir>/root` is its `/`. */
export interface UnpackedPackage {
  readonly name: string;
  readonly version: string;
  readonly dir: string;
}

const repoRoot = join(import.meta.dirname, '..');

export function driverRolloutCache(): string {
  return process.env['DRIVER_ROLLOUT_CACHE'] ?? join(homedir(), '.cache', 'driver-rollout');
}

/** The agent module cache the flavours' builds live in. */
export function flavourModuleCache(): string {
  return join(driverRolloutCache(), 'vendor-agent-cache');
}

let packagesOnce: Promise<readonly UnpackedPackage[]> | undefined;

/**
 * scripts/ensure-vendor-packages.sh, once per process: every vendor package it fetches (a
 * contrib/non-free apt sources file of its own, `apt-get download`, `dpkg-deb -x`, cached by version).
 */
export async function fetchVendorPackages(): Promise<readonly UnpackedPackage[]> {
  packagesOnce ??= execa('bash', [join(repoRoot, 'scripts', 'ensure-vendor-packages.sh')], { stderr: 'inherit' }).then((result) =>
    result.stdout.split('\n').flatMap((line) => {
      const [name, dir] = line.trim().split(/\s+/);
      if (name === undefined || dir === undefined) return [];
      return [{ name, dir, version: dir.slice(dir.lastIndexOf('/') + 1).slice(name.length + 1) }];
    }),
  );
  return packagesOnce;
}

/** The fetched package of this name, at this version when given. */
export async function vendorPackage(name: string, version?: string): Promise<UnpackedPackage> {
  const all = await fetchVendorPackages();
  const found = all.find((p) => p.name === name && (version === undefined || p.version === version));
  if (found === undefined) throw new Error(`scripts/ensure-vendor-packages.sh did not provide ${name}${version === undefined ? '' : ` ${version}`}`);
  return found;
}

/** Installs Debian's headers of a kernel the modules are built for, when they are not there. */
export async function ensureKernelHeaders(kernelRelease: string): Promise<void> {
  if (await pathExists(join('/usr/src', `linux-headers-${kernelRelease}`, 'Makefile'))) return;
  await execa('apt-get', ['-o', 'DPkg::Lock::Timeout=600', 'install', '-y', '-q', '--no-install-recommends', `linux-headers-${kernelRelease}`], {
    stdout: 'inherit',
    stderr: 'inherit',
    env: { DEBIAN_FRONTEND: 'noninteractive' },
  });
}

export async function buildFlavourModules(flavour: DriverFlavour, kernelRelease: string): Promise<FlavourModules> {
  await ensureKernelHeaders(kernelRelease);
  const source = await vendorPackage(flavour.sourcePackage.name, flavour.sourcePackage.version);
  const firmware = flavour.firmwarePackage === undefined ? undefined : await vendorPackage(flavour.firmwarePackage.name, flavour.firmwarePackage.version);
  const sourceDir = join(source.dir, 'root', 'usr', 'src');
  const present = await readdir(sourceDir);
  if (!present.includes(flavour.dkmsDirectory)) throw new Error(`${source.name} ${source.version} has no /usr/src/${flavour.dkmsDirectory} (it has: ${present.join(', ')})`);
  const cacheDir = flavourModuleCache();
  await mkdir(cacheDir, { recursive: true });
  const release = await lock(cacheDir, { lockfilePath: join(cacheDir, `.${flavour.name}.lock`), retries: { retries: 2000, minTimeout: 2000, maxTimeout: 5000 }, stale: 60_000 });
  try {
    const built = await buildDriver({
      driver: flavour.modules[0] ?? flavour.name,
      version: source.version,
      kernelVersion: kernelRelease,
      source: { kind: 'directory', path: sourceDir },
      cacheDir,
      recipe: { kind: 'dkms', packages: [{ directory: flavour.dkmsDirectory, variables: {} }] },
      logger: pino({ level: 'silent' }),
    });
    const files = Object.fromEntries(built.modules.map((m) => [m.name, m.path]));
    return { flavour, kernelRelease, sourceDir, files, firmwareDir: firmware === undefined ? undefined : join(firmware.dir, 'root', 'lib', 'firmware'), built };
  } finally {
    await release();
  }
}

if (import.meta.main) {
  const [name, kernel] = process.argv.slice(2);
  if (name === undefined || kernel === undefined) throw new Error('usage: node drivers/build-flavour-modules.ts <flavour> <kernel release>');
  const started = performance.now();
  const modules = await buildFlavourModules(driverFlavour(name), kernel);
  process.stdout.write(`${name} for ${kernel}: ${modules.built.cacheHit ? 'cached' : 'built'} in ${Math.round((performance.now() - started) / 1000)} s: ${Object.keys(modules.files).join(' ')}\n`);
}
