import { stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { beforeAll, describe, expect, it } from 'vitest';
import { DRIVER_FLAVOURS, imageTag } from '../../drivers/flavours.ts';
import { runCachedBuild } from '../bed/ensure-binaries.ts';
import { readImageArchive, type ImageArchive } from './read-image-archive.ts';

/*
 * The driver images (drivers/build-driver-images.ts, through test/images/build-driver-images.sh,
 * cached by their inputs): read back from their docker-archives, and the agent inside each one
 * asked what it would load. Cold, this waits for both NVIDIA builds (the vendor module cache's,
 * shared with test/vendor-drivers).
 */

const REPO = resolve(import.meta.dirname, '../..');
const RUN_IN_IMAGE = join(REPO, 'test/images/run-in-image.sh');
let dir: string;
beforeAll(async () => {
  dir = await runCachedBuild(join(REPO, 'test/images/build-driver-images.sh'));
}, 5_400_000);

async function runInImage(archive: string, script: string): Promise<string> {
  return (await execa('bash', [RUN_IN_IMAGE, archive, '--', 'sh', '-c', script])).stdout;
}

describe.each(DRIVER_FLAVOURS.map((f) => [f.name, f] as const))('the %s driver image', (_name, flavour) => {
  let image: ImageArchive;
  let archive: string;
  beforeAll(async () => {
    archive = join(dir, `${flavour.name}.tar`);
    image = await readImageArchive(archive);
    const { size } = await stat(archive);
    console.info(`driver image ${flavour.repository}:${imageTag(flavour)}: ${Math.round(size / 1e6)} MB as a docker-archive`);
  }, 300_000);

  it('is the agent image plus the sources, tagged <driver-version>-<flavour>-<distro>', () => {
    expect(image.repoTags.some((t) => t.endsWith(`${flavour.repository}:${imageTag(flavour)}`))).toBe(true);
    expect(imageTag(flavour)).toMatch(new RegExp(`^${flavour.driverVersion.replaceAll('.', '\\.')}-[a-z]+-debian12$`));
    expect(image.config.Entrypoint).toEqual(['node', 'agent/main.ts']);
    expect(image.files).toContain('app/agent/main.ts');
    expect(image.files).toContain(`opt/driver-src/${flavour.dkmsDirectory}/dkms.conf`);
  });

  it.runIf(flavour.firmwarePackage !== undefined)('carries the GSP firmware of its own release', () => {
    for (const file of ['gsp_ga10x.bin', 'gsp_tu10x.bin']) expect(image.files).toContain(`opt/driver-firmware/nvidia/${flavour.driverVersion}/${file}`);
  });

  it.runIf(flavour.prebuiltKernels.length > 0)(
    'carries modules prebuilt for its kernels, whose vermagic and version name them, and the agent takes them without compiling',
    { timeout: 300_000 },
    async () => {
      for (const kernel of flavour.prebuiltKernels) {
        for (const module of flavour.modules) expect(image.files).toContain(`opt/lib/modules/${kernel}/${module}.ko`);
        const infos = await runInImage(archive, `for f in /opt/lib/modules/${kernel}/*.ko; do echo "$(basename $f) $(modinfo -F vermagic $f | cut -d' ' -f1) $(modinfo -F version $f)"; done`);
        const lines = infos.split('\n').filter((l) => l !== '');
        expect(lines).toHaveLength(flavour.modules.length);
        for (const line of lines) expect(line).toMatch(new RegExp(` ${kernel} ${flavour.driverVersion.replaceAll('.', '\\.')}$`));
        // The agent's own lookup, as it runs at a node's start (agent/build/find-prebuilt-modules.ts).
        const found = await runInImage(
          archive,
          `cd /app && node --input-type=module -e "const m = await import('/app/agent/build/find-prebuilt-modules.ts'); const mods = await m.findPrebuiltModules('/opt/lib/modules', '${kernel}'); console.log(mods.map((x) => x.name).sort().join(' '))"`,
        );
        expect(found.trim().split(' ')).toEqual([...flavour.modules].sort());
      }
    },
  );

  it.runIf(flavour.prebuiltKernels.length === 0)('carries no prebuilt modules: the node builds them with DKMS', () => {
    expect([...image.files].filter((f) => f.startsWith('opt/lib/modules/'))).toEqual([]);
  });
});
