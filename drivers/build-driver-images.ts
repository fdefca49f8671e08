import { cp, mkdir, mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { buildFlavourModules, vendorPackage } from './build-flavour-modules.ts';
import { DRIVER_FLAVOURS, driverFlavour, imageTag, type DriverFlavour } from './flavours.ts';
import { stageDriverRoot } from './stage-driver-root.ts';

/** Where each image carries its driver root (the agent's DRIVER_ROOT_DIR). */
export const IMAGE_DRIVER_ROOT = '/opt/driver-root';

/**
 * Builds the driver images, one per flavour (drivers/flavours.ts), with buildah (no daemon):
 * FROM the agent image, plus, from Debian's packages of one release,
 *
 *   /opt/driver-src/<dkms directory>/        the kernel module sources (the agent's DRIVER_SOURCE_DIR)
 *   /opt/driver-firmware/                    the firmware of the same release (FIRMWARE_DIR)
 *   /opt/lib/modules/<kernel>/*.ko           modules prebuilt for the flavour's kernels (PREBUILT_MODULES_DIR)
 *   /opt/driver-root/                        the driver root: the user space of the same release at
 *                                            Debian's paths, chrootable (DRIVER_ROOT_DIR; drivers/stage-driver-root.ts)
 *
 * tagged `<registry>/<repository>:<driver-version>-<flavour>-<distro>`. The prebuilt modules come
 * from the agent's own dkms recipe (drivers/build-flavour-modules.ts), cached outside the image by
 * sources, kernel and compiler: a rebuild of the image pays no compile. The host needs Debian 12
 * (apt, for the packages and the prebuilt kernels' headers), buildah and the repository's
 * `npm ci`; the project publishes no images.
 *
 *   node drivers/build-driver-images.ts --agent-image registry.example.com/driver-rollout/agent:0.1.0 \
 *     --registry registry.example.com [--push] [--archive-dir DIR] [flavour ...]
 */

export interface DriverImage {
  readonly flavour: DriverFlavour;
  /** `<registry>/<repository>:<tag>`. */
  readonly reference: string;
  /** The docker-archive tarball, when asked for (`--archive-dir`). */
  readonly archive?: string;
  /** The docker-archive's size (all layers, the agent image's included); 0 without --archive-dir. */
  readonly sizeBytes: number;
  readonly buildSeconds: number;
}

export interface BuildDriverImagesOptions {
  readonly agentImage: string;
  /** Prefix of every reference (`registry.example.com/team`); empty for local names. */
  readonly registry: string;
  readonly flavours: readonly DriverFlavour[];
  readonly push: boolean;
  readonly archiveDir?: string;
  readonly log: (line: string) => void;
}

export function imageReference(registry: string, flavour: DriverFlavour): string {
  return `${registry === '' ? '' : `${registry.replace(/\/+$/, '')}/`}${flavour.repository}:${imageTag(flavour)}`;
}

async function buildah(args: readonly string[]): Promise<string> {
  return (await execa('buildah', args, { stderr: 'inherit' })).stdout.trim();
}

/** The image's file tree for one flavour, staged in `root` (to be copied to `/`). */
async function stageFlavour(flavour: DriverFlavour, root: string, log: (line: string) => void): Promise<void> {
  const source = await vendorPackage(flavour.sourcePackage.name, flavour.sourcePackage.version);
  await cp(join(source.dir, 'root', 'usr', 'src', flavour.dkmsDirectory), join(root, 'opt', 'driver-src', flavour.dkmsDirectory), { recursive: true });
  if (flavour.firmwarePackage !== undefined) {
    const firmware = await vendorPackage(flavour.firmwarePackage.name, flavour.firmwarePackage.version);
    await cp(join(firmware.dir, 'root', 'lib', 'firmware'), join(root, 'opt', 'driver-firmware'), { recursive: true });
  }
  const manifest = await stageDriverRoot(flavour, join(root, IMAGE_DRIVER_ROOT));
  log(`${flavour.name}: driver root of ${manifest.packages.length} packages (${manifest.sha256.slice(0, 12)})`);
  for (const kernel of flavour.prebuiltKernels) {
    const started = performance.now();
    const modules = await buildFlavourModules(flavour, kernel);
    log(`${flavour.name}: modules for ${kernel} ${modules.built.cacheHit ? 'from the cache' : 'built'} in ${Math.round((performance.now() - started) / 1000)} s`);
    const dir = join(root, 'opt', 'lib', 'modules', kernel);
    await mkdir(dir, { recursive: true });
    const order = modules.built.modules.map((m) => m.name);
    for (const name of order) await cp(modules.files[name] ?? '', join(dir, `${name}.ko`));
    await writeFile(join(dir, 'modules.order'), order.map((name) => `${name}.ko\n`).join(''));
  }
}

export async function buildDriverImages(options: BuildDriverImagesOptions): Promise<DriverImage[]> {
  const images: DriverImage[] = [];
  for (const flavour of options.flavours) {
    const started = performance.now();
    const reference = imageReference(options.registry, flavour);
    const staging = await mkdtemp(join(tmpdir(), `driver-image-${flavour.name}-`));
    try {
      await stageFlavour(flavour, join(staging, 'root'), options.log);
      const container = await buildah(['from', '--quiet', options.agentImage]);
      try {
        await buildah(['copy', '--quiet', container, join(staging, 'root'), '/']);
        await buildah([
          'config',
          '--label', `org.opencontainers.image.title=${flavour.repository}`,
          '--label', `org.opencontainers.image.version=${imageTag(flavour)}`,
          '--label', `io.driver-rollout.flavour=${flavour.name}`,
          '--label', `io.driver-rollout.driver-version=${flavour.driverVersion}`,
          '--label', `io.driver-rollout.source-package=${flavour.sourcePackage.name}=${flavour.sourcePackage.version}`,
          '--label', `io.driver-rollout.prebuilt-kernels=${flavour.prebuiltKernels.join(',')}`,
          '--label', `io.driver-rollout.driver-root=${IMAGE_DRIVER_ROOT}`,
          container,
        ]);
        await buildah(['commit', '--quiet', container, reference]);
      } finally {
        await buildah(['rm', container]).catch(() => undefined);
      }
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
    let archive: string | undefined;
    if (options.archiveDir !== undefined) {
      await mkdir(options.archiveDir, { recursive: true });
      archive = join(options.archiveDir, `${flavour.name}.tar`);
      await rm(`${archive}.part`, { force: true });
      await buildah(['push', '--quiet', reference, `docker-archive:${archive}.part:${reference}`]);
      await rename(`${archive}.part`, archive);
    }
    if (options.push) await buildah(['push', '--quiet', reference]);
    // The image's size as a runtime pulls it: its docker-archive, all layers (the agent image's included).
    const sizeBytes = archive === undefined ? 0 : (await stat(archive)).size;
    const buildSeconds = Math.round((performance.now() - started) / 100) / 10;
    options.log(`${reference}: ${sizeBytes === 0 ? '' : `${Math.round(sizeBytes / 1e6)} MB, `}built in ${buildSeconds} s`);
    images.push({ flavour, reference, sizeBytes, buildSeconds, ...(archive === undefined ? {} : { archive }) });
  }
  return images;
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      'agent-image': { type: 'string' },
      registry: { type: 'string', default: '' },
      push: { type: 'boolean', default: false },
      'archive-dir': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help || values['agent-image'] === undefined) {
    process.stdout.write(
      'usage: node drivers/build-driver-images.ts --agent-image IMAGE [--registry PREFIX] [--push] [--archive-dir DIR] [flavour ...]\n' +
        `flavours: ${DRIVER_FLAVOURS.map((f) => f.name).join(', ')} (default: all)\n`,
    );
    process.exitCode = values.help ? 0 : 2;
  } else {
    const flavours = positionals.length === 0 ? DRIVER_FLAVOURS : positionals.map(driverFlavour);
    const images = await buildDriverImages({
      agentImage: values['agent-image'],
      registry: values.registry,
      flavours,
      push: values.push,
      ...(values['archive-dir'] === undefined ? {} : { archiveDir: values['archive-dir'] }),
      log: (line) => process.stderr.write(`[driver images] ${line}\n`),
    });
    for (const image of images) process.stdout.write(`${image.flavour.name} ${image.reference}${image.archive === undefined ? '' : ` ${image.archive}`}\n`);
  }
}

