/**
 * The driver images the project knows how to build (drivers/build-driver-images.ts) and the chart's
 * presets use (charts/driver-rollout/templates/_presets.tpl; a test keeps the two in step): each
 * one Debian package of kernel module sources with a `dkms.conf`, built by the agent's `dkms`
 * recipe, plus the firmware of the same release where the modules need it.
 *
 * `prebuiltKernels` are the kernel ABIs whose modules the image carries ready-built
 * (`/opt/lib/modules/<kernel>/`): the newest bookworm ABI each flavour builds for. On any other
 * kernel the agent compiles on the node, against the node's headers.
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
}

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
