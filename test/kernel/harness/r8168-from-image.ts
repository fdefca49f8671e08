import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { buildDriver } from '../../../agent/build/build-driver.ts';
import { readModuleInfo } from '../../../agent/build/read-module-info.ts';
import type { DriverToLoad } from '../../../agent/kernel/reload-driver.ts';
import { flavourModuleCache } from '../../../drivers/build-flavour-modules.ts';
import { driverFlavour } from '../../../drivers/flavours.ts';
import { runCachedBuild } from '../../bed/ensure-binaries.ts';
import { extractFromImage } from '../../images/extract-from-image.ts';

const REPO = resolve(import.meta.dirname, '../../..');

/**
 * Realtek's r8168 as the `dkms-nic` driver image delivers it: the image's DKMS sources
 * (/opt/driver-src, copied out of the built image's archive) compiled for `kernelVersion` by the
 * agent's own dkms recipe, as the agent does on a node (the image carries no prebuilt r8168). The
 * module cache is the one the driver images and vendor tests share, so sources identical to the
 * image step's are not compiled again.
 */
export async function r8168FromImage(kernelVersion: string): Promise<DriverToLoad> {
  const flavour = driverFlavour('dkms-nic');
  const images = await runCachedBuild(join(REPO, 'test/images/build-driver-images.sh'));
  const sourceDir = await mkdtemp(join(tmpdir(), 'driver-rollout-r8168-image-src-'));
  const built = await (async () => {
    try {
      await extractFromImage(join(images, `${flavour.name}.tar`), '/opt/driver-src', sourceDir);
      return await buildDriver({
        driver: flavour.modules[0] ?? flavour.name,
        version: flavour.sourcePackage.version,
        kernelVersion,
        source: { kind: 'directory', path: sourceDir },
        cacheDir: flavourModuleCache(),
        recipe: { kind: 'dkms', packages: [{ directory: flavour.dkmsDirectory, variables: {} }] },
        logger: pino({ level: 'silent' }),
      });
    } finally {
      await rm(sourceDir, { recursive: true, force: true });
    }
  })();
  const module = built.modules.find((m) => m.name === 'r8168');
  if (module === undefined) throw new Error(`the r8168 image's sources built no r8168.ko: ${built.modules.map((m) => m.name).join(', ')}`);
  const info = await readModuleInfo(module.path);
  return {
    driver: 'r8168',
    version: info.version ?? flavour.driverVersion,
    kernelVersion,
    modules: [{ name: info.name, path: module.path, srcversion: info.srcversion, version: info.version, dependsOn: info.dependsOn, parameters: info.parameters }],
  };
}
