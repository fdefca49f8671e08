/**
 * The driver images the project knows how to build (drivers/build-driver-images.ts) and the chart's
 * presets use (charts/driver-rollout/templates/_presets.tpl; a test keeps the two in step): each
 * one Debian package of kernel module sources with a `dkms.conf`, built by the agent's `dkms`
 * recipe, plus the firmware of the same release where the modules need it.
 *
 * `prebuiltKernels` are the kernel ABIs whose modules the image carries ready-built
 * (`/opt/lib/modules/<kernel>/`): the newest bookworm ABI each flavour builds for. On any other
 * kernel the agent compiles on the node, against the node's headers.
 *
 * Every image carries a driver root (`/opt/driver-root`, drivers/stage-driver-root.ts) that the
 * agent publishes while the modules are loaded (DRIVER_ROOT_DIR, agent/root/): for NVIDIA the user
 * space of the modules' own release, `userSpacePackages` at `userSpaceVersion`, and the daemons
 * the agent runs from it, `daemonPackages`.
 */
export interface DriverFlavour {
  /** The chart preset of the same name. */
  readonly name: 'nvidia-open' | 'nvidia' | 'dkms-nic';
  /** Image repository, before the user's registry: `<registry>/<repository>:<tag>`. */
  readonly repository: string;
  /** Upstream release: the agent's DRIVER_VERSION and the first part of the tag. */
  readonly driverVersion: string;
  /** The tag's middle part (`<driver-version>-<flavour>-<distro>`, NVIDIA's scheme). */
  readonly tagFlavour: string;
  /** Debian package of the module sources, at this exact version (apt's, any suite). */
  readonly sourcePackage: { readonly name: string; readonly version: string };
  /** The DKMS package directory under the package's /usr/src (the recipe's `directory`). */
  readonly dkmsDirectory: string;
  /** Firmware package of the same release, when the modules declare firmware. */
  readonly firmwarePackage?: { readonly name: string; readonly version: string };
  readonly prebuiltKernels: readonly string[];
  /** The kernel's name for every module the sources build, in dkms.conf's order. */
  readonly modules: readonly string[];
  /**
   * Debian packages of the user space of the modules' release, in the driver root at Debian's
   * paths; all at `userSpaceVersion` (scripts/ensure-vendor-packages.sh pins the same list).
   */
  readonly userSpacePackages: readonly string[];
  readonly userSpaceVersion?: string;
  /**
   * Debian packages of the daemons the agent runs from the root beside the loaded driver, each at
   * the version Debian ships for the release (scripts/ensure-vendor-packages.sh pins the same).
   */
  readonly daemonPackages: readonly { readonly name: string; readonly version: string }[];
}

/**
 * NVIDIA's user space for the container toolkit's `utility` and `compute` capabilities, as Debian
 * packages it (NVIDIA's libnvidia-container, src/nvc_info.c: utility_libs, compute_libs,
 * utility_bins, compute_bins; drivers/nvidia-toolkit-names.ts lists what it looks up).
 */
export const NVIDIA_USER_SPACE_PACKAGES: readonly string[] = [
  'libcuda1',
  'libnvidia-ml1',
  'libnvidia-cfg1',
  'nvidia-smi',
  'libnvidia-ptxjitcompiler1',
  'libnvidia-nvvm4',
  'libcudadebugger1',
  'libnvidia-allocator1',
  'libnvidia-pkcs11-openssl3',
  'nvidia-cuda-mps',
];

/**
 * Debian's nvidia-persistenced: one version for both 535 releases, the one their libcuda1 recommends
 * (`nvidia-persistenced (>= 535)`); it reaches the driver through the root's libnvidia-cfg (of the modules' release).
 */
export const NVIDIA_DAEMON_PACKAGES: DriverFlavour['daemonPackages'] = [{ name: 'nvidia-persistenced', version: '535.171.04-1~deb12u1' }];

/** The distribution part of every tag: the images are Debian 12 (bookworm), as the agent image. */
export const DISTRO = 'debian12';

export const DRIVER_FLAVOURS: readonly DriverFlavour[] = [
  {
    name: 'nvidia-open',
    repository: 'driver-rollout/nvidia-driver',
    driverVersion: '535.261.03',
    tagFlavour: 'open',
    sourcePackage: { name: 'nvidia-open-kernel-dkms', version: '535.261.03-1' },
    dkmsDirectory: 'nvidia-current-open-535.261.03',
    firmwarePackage: { name: 'firmware-nvidia-gsp', version: '535.261.03-1' },
    userSpacePackages: NVIDIA_USER_SPACE_PACKAGES,
    userSpaceVersion: '535.261.03-1',
    daemonPackages: NVIDIA_DAEMON_PACKAGES,
    // 535.261.03's conftest predates the four-argument pci_resize_resource Debian backported to
    // ABI 6.1.0-56 (nv-pci.c: too few arguments): 6.1.0-50 is the newest ABI it builds for.
    prebuiltKernels: ['6.1.0-50-amd64'],
    modules: ['nvidia', 'nvidia_modeset', 'nvidia_drm', 'nvidia_uvm', 'nvidia_peermem'],
  },
  {
    name: 'nvidia',
    repository: 'driver-rollout/nvidia-driver',
    driverVersion: '535.309.01',
    tagFlavour: 'proprietary',
    sourcePackage: { name: 'nvidia-kernel-dkms', version: '535.309.01-0+deb12u1' },
    dkmsDirectory: 'nvidia-current-535.309.01',
    firmwarePackage: { name: 'firmware-nvidia-gsp', version: '535.309.01-0+deb12u1' },
    userSpacePackages: NVIDIA_USER_SPACE_PACKAGES,
    userSpaceVersion: '535.309.01-0+deb12u1',
    daemonPackages: NVIDIA_DAEMON_PACKAGES,
    prebuiltKernels: ['6.1.0-56-amd64'],
    modules: ['nvidia', 'nvidia_modeset', 'nvidia_drm', 'nvidia_uvm', 'nvidia_peermem'],
  },
  {
    name: 'dkms-nic',
    repository: 'driver-rollout/r8168-driver',
    driverVersion: '8.051.02',
    tagFlavour: 'dkms',
    sourcePackage: { name: 'r8168-dkms', version: '8.051.02-2' },
    dkmsDirectory: 'r8168-8.051.02',
    // Built on the node (the DKMS path MOFED takes); the image carries no prebuilt modules.
    prebuiltKernels: [],
    modules: ['r8168'],
    // r8168 has no user space: its root holds the libc and the manifest only.
    userSpacePackages: [],
    daemonPackages: [],
  },
];

/** `<driver-version>-<flavour>-<distro>`, e.g. `535.309.01-proprietary-debian12`. */
export function imageTag(flavour: DriverFlavour): string {
  return `${flavour.driverVersion}-${flavour.tagFlavour}-${DISTRO}`;
}

export function driverFlavour(name: string): DriverFlavour {
  const flavour = DRIVER_FLAVOURS.find((f) => f.name === name);
  if (flavour === undefined) throw new Error(`unknown driver flavour '${name}': one of ${DRIVER_FLAVOURS.map((f) => f.name).join(', ')}`);
  return flavour;
}
