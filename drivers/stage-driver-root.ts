import { createHash } from 'node:crypto';
import { cp, lstat, mkdir, readdir, readFile, readlink, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { execa } from 'execa';
import { pathExists } from '../shared/fs/if-exists.ts';
import { DRIVER_ROOT_MANIFEST, type DriverRootManifest } from '../shared/driver-root-manifest.ts';
import { vendorPackage, type UnpackedPackage } from './build-flavour-modules.ts';
import type { DriverFlavour } from './flavours.ts';
import { NVIDIA_ALTERNATIVES } from './nvidia-toolkit-names.ts';

/**
 * The driver root of a flavour's image, staged in `dest` (the image's `/opt/driver-root`): a small
 * Debian tree the agent publishes at the node's driver root path while the modules are loaded
 * (agent/root/). It holds, unpacked from Debian's packages (never installed: no maintainer
 * scripts), the flavour's user space and daemons at Debian's own paths and the C library it needs, so that the
 * root can be chrooted into as NVIDIA's validator does (`chroot /run/nvidia/driver nvidia-smi`):
 *
 *   usr/lib/x86_64-linux-gnu/nvidia/current/lib*.so.<release>   the NVIDIA libraries
 *   usr/lib/nvidia/current/nvidia-smi                            nvidia-smi
 *   usr/bin/nvidia-persistenced                                  the daemons (`daemonPackages`), run by the agent
 *   usr/lib/x86_64-linux-gnu/lib*.so.N, usr/bin/nvidia-smi       the names update-alternatives gives them
 *                                                                 (nvidia-alternative's postinst), as relative links
 *   etc/ld.so.cache                                              ldconfig of the root
 *   etc/driver-rollout/driver-root.json                          the manifest (shared/driver-root-manifest.ts)
 *   dev/ proc/ sys/                                              mount points: the agent binds the node's there
 *
 * The host needs Debian's ldconfig and root (ldconfig -r chroots).
 */
export async function stageDriverRoot(flavour: DriverFlavour, dest: string): Promise<DriverRootManifest> {
  const packages: UnpackedPackage[] = [];
  for (const name of ['libc6', 'libgcc-s1', ...(flavour.userSpacePackages.length > 0 ? ['libssl3'] : [])]) packages.push(await vendorPackage(name));
  for (const name of flavour.userSpacePackages) packages.push(await vendorPackage(name, flavour.userSpaceVersion));
  for (const daemon of flavour.daemonPackages) packages.push(await vendorPackage(daemon.name, daemon.version));
  await mkdir(dest, { recursive: true });
  for (const unpacked of packages) await cp(join(unpacked.dir, 'root'), dest, { recursive: true, verbatimSymlinks: true, force: true });
  if (flavour.userSpacePackages.length > 0) await makeAlternatives(dest, flavour.driverVersion);
  for (const dir of ['dev', 'proc', 'sys', 'tmp']) await mkdir(join(dest, dir), { recursive: true });
  // Debian's libc-bin ships /etc/ld.so.conf; libc6 only its ld.so.conf.d entry. Debian's
  // alternative puts libnvidia-cfg.so.1 in /usr/lib/x86_64-linux-gnu/nvidia/, outside the
  // multiarch directories: listed so that the cache names it.
  await writeFile(join(dest, 'etc', 'ld.so.conf'), 'include /etc/ld.so.conf.d/*.conf\n');
  if (flavour.userSpacePackages.length > 0) {
    await writeFile(join(dest, 'etc', 'ld.so.conf.d', 'driver-rollout-nvidia.conf'), '# libnvidia-cfg.so.1 (nvidia-alternative)\n/usr/lib/x86_64-linux-gnu/nvidia\n');
  }
  await execa('ldconfig', ['-r', dest]);
  const manifest: DriverRootManifest = {
    flavour: flavour.name,
    driverVersion: flavour.driverVersion,
    packages: packages.map((p) => `${p.name}=${p.version}`),
    sha256: await digestTree(dest),
  };
  await mkdir(dirname(join(dest, DRIVER_ROOT_MANIFEST)), { recursive: true });
  await writeFile(join(dest, DRIVER_ROOT_MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/**
 * Each alternative whose target the root has, linked to the choice update-alternatives would
 * make. Debian's links go through `/etc/alternatives/<name>` and are absolute; these are relative
 * and direct, so that they resolve the same seen from inside the root (a chroot, the toolkit's
 * root-aware lookup) and from outside it (NVIDIA's validator resolves `<root>/usr/bin/nvidia-smi`
 * with Go's EvalSymlinks from its own container, where `/etc/alternatives` is not the root's).
 */
async function makeAlternatives(root: string, version: string): Promise<void> {
  for (const alternative of NVIDIA_ALTERNATIVES) {
    const link = alternative.link.replaceAll('{version}', version);
    const target = alternative.target.replaceAll('{version}', version);
    if (!(await pathExists(join(root, target)))) continue;
    await mkdir(dirname(join(root, link)), { recursive: true });
    await symlink(posix.relative(posix.dirname(link), target), join(root, link));
  }
}

/** sha256 over every path, kind and content (symlinks: their text) in sorted order. */
async function digestTree(root: string): Promise<string> {
  const hash = createHash('sha256');
  const walk = async (relative: string): Promise<void> => {
    for (const name of (await readdir(join(root, relative))).sort()) {
      const path = join(relative, name);
      const info = await lstat(join(root, path));
      if (info.isDirectory()) {
        hash.update(`D ${path}\0`);
        await walk(path);
      } else if (info.isSymbolicLink()) {
        hash.update(`L ${path}\0${await readlink(join(root, path))}\0`);
      } else {
        hash.update(`F ${path}\0${info.mode & 0o7777}\0`);
        hash.update(await readFile(join(root, path)));
      }
    }
  };
  await walk('');
  return hash.digest('hex');
}
