import { mkdtemp, readFile, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DRIVER_ROOT } from '../../drivers/build-driver-images.ts';
import { DRIVER_FLAVOURS, imageTag } from '../../drivers/flavours.ts';
import { TOOLKIT_BINARIES, TOOLKIT_BINARY_DIRS, TOOLKIT_LIBRARIES } from '../../drivers/nvidia-toolkit-names.ts';
import { DRIVER_ROOT_MANIFEST, parseDriverRootManifest } from '../../shared/driver-root-manifest.ts';
import { extractFromImage } from './extract-from-image.ts';
import { readLdCache, resolveInRoot } from './resolve-in-root.ts';
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

  describe(`its driver root (${IMAGE_DRIVER_ROOT}), as copied out of the image`, () => {
    let root: string;
    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), `driver-root-${flavour.name}-`));
      await extractFromImage(archive, IMAGE_DRIVER_ROOT, root);
    }, 300_000);
    afterAll(async () => {
      if ((root as string | undefined) !== undefined) await rm(root, { recursive: true, force: true });
    });

    it('has a manifest naming its release and the Debian packages it was made from', async () => {
      const manifest = parseDriverRootManifest(await readFile(join(root, DRIVER_ROOT_MANIFEST), 'utf8'));
      if (typeof manifest === 'string') throw new Error(manifest);
      expect(manifest.flavour).toBe(flavour.name);
      expect(manifest.driverVersion).toBe(flavour.driverVersion);
      for (const name of flavour.userSpacePackages) expect(manifest.packages).toContain(`${name}=${flavour.userSpaceVersion ?? ''}`);
      for (const daemon of flavour.daemonPackages) expect(manifest.packages).toContain(`${daemon.name}=${daemon.version}`);
      expect(manifest.packages.some((p) => p.startsWith('libc6='))).toBe(true);
    });

    it("can be chrooted into: its own C library runs there", async () => {
      const { stdout } = await execa('chroot', [root, '/lib/x86_64-linux-gnu/libc.so.6']);
      expect(stdout).toMatch(/^GNU C Library \(Debian GLIBC 2\.36/);
    });

    it.runIf(flavour.userSpacePackages.length > 0)(
      "answers every library the container toolkit looks up from its ld.so.cache, each resolving inside the root to the modules' release",
      async () => {
        const cache = await readLdCache(root);
        const found: Record<string, string> = {};
        for (const library of TOOLKIT_LIBRARIES) {
          // The toolkit matches cache entries by prefix, then wants the resolved file's name to end in the driver version.
          const entries = [...cache.entries()].filter(([name]) => name.startsWith(library));
          expect(entries.length, `${library} in ${root}/etc/ld.so.cache`).toBeGreaterThan(0);
          for (const [name, path] of entries) {
            const resolved = await resolveInRoot(root, path);
            expect(resolved, `${name} => ${path}`).toMatch(new RegExp(`\\.so\\.${flavour.driverVersion.replaceAll('.', '\\.')}$`));
            expect((await stat(join(root, resolved ?? ''))).isFile()).toBe(true);
            found[name] = resolved ?? '';
          }
        }
        console.info(`driver root of ${flavour.name}: ${JSON.stringify(found, null, 1)}`);
        expect(found['libcuda.so.1']).toBe(`/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.${flavour.driverVersion}`);
        expect(found['libnvidia-ml.so.1']).toBe(`/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.${flavour.driverVersion}`);
      },
    );

    it.runIf(flavour.daemonPackages.length > 0)(
      "as the agent reads it in the image (DRIVER_ROOT_DIR): the version guard passes the image's own modules, and nvidia-persistenced is found and runs with the image's libraries",
      { timeout: 300_000 },
      async () => {
        const kernel = flavour.prebuiltKernels[0] ?? '';
        // The agent's own code in the image: its guard (modinfo on the prebuilt modules, the root's
        // soname links, nvidia-smi -h run as the agent runs it), then the daemons it would start.
        const out = await runInImage(
          archive,
          `cd /app && node --input-type=module -e "
            const prebuilt = await import('/app/agent/build/find-prebuilt-modules.ts');
            const guard = await import('/app/agent/user-space/check-user-space.ts');
            const daemons = await import('/app/agent/daemons/gpu-daemons.ts');
            const modules = await prebuilt.findPrebuiltModules('/opt/lib/modules', '${kernel}');
            const found = await guard.checkUserSpace('gpu', '${IMAGE_DRIVER_ROOT}', await guard.readModuleFileVersions(modules.map((m) => ({ name: m.name, path: m.builtPath }))));
            console.log(JSON.stringify({ smi: found.nvidiaSmi?.version, libraries: [...new Set(found.libraries.map((l) => l.version))], daemons: await daemons.findDaemonBinaries('${IMAGE_DRIVER_ROOT}') }));
          " && ${IMAGE_DRIVER_ROOT}/usr/bin/nvidia-persistenced --version`,
        );
        const [json = '', ...rest] = out.split('\n');
        expect(JSON.parse(json)).toEqual({
          smi: flavour.driverVersion,
          libraries: [flavour.driverVersion],
          daemons: { persistenced: `${IMAGE_DRIVER_ROOT}/usr/bin/nvidia-persistenced`, libraryDir: `${IMAGE_DRIVER_ROOT}/usr/lib/x86_64-linux-gnu/nvidia/current` },
        });
        // Debian's one nvidia-persistenced, not the modules' release (it reaches the driver through the root's libnvidia-cfg).
        expect(rest.join('\n')).toMatch(/nvidia-persistenced:\s+version 535\.171\.04/);
      },
    );

    it.runIf(flavour.daemonPackages.length > 0)(
      "as the agent prepares it for publishing: nvidia-persistenced's run dir resolves into the root's copy, where the toolkit looks for its socket (<root>/var/run/nvidia-persistenced/socket)",
      { timeout: 300_000 },
      async () => {
        // The agent's own code in the image, as its verify step runs it before the daemons start:
        // the copy the root is published from (bind-mounted read-only at /run/nvidia/driver; the
        // mount itself is shown in the kernel tests), the daemon plan for a GPU node (no GPU here:
        // persistenced itself cannot start, it finds no driver), the run dir linked into the copy.
        // A Unix socket opened where persistenced opens its own answers at the root's path.
        const out = await runInImage(
          archive,
          `cd /app && node --input-type=module -e "
            const net = await import('node:net');
            const { realpath } = await import('node:fs/promises');
            const { createDriverRoot } = await import('/app/agent/root/driver-root.ts');
            const { findDaemonBinaries } = await import('/app/agent/daemons/gpu-daemons.ts');
            const { planGpuDaemons } = await import('/app/agent/daemons/plan/plan-gpu-daemons.ts');
            const { linkRunDir } = await import('/app/agent/daemons/link-run-dir.ts');
            const { createLogger } = await import('/app/shared/logger.ts');
            const root = createDriverRoot({ imageDir: '${IMAGE_DRIVER_ROOT}', path: '/run/nvidia/driver', storeDir: '/var/lib/driver-rollout/cache/driver-root/gpu', readyMarker: '/run/nvidia/validations/.driver-ctr-ready', check: [], sysModuleDir: '/sys/module', log: createLogger('image', 'silent') });
            const copy = await root.prepare();
            const plan = planGpuDaemons([{ address: '0000:01:00.0', vendor: '0x10de', device: '0x2330', classCode: '0x030200' }], [], await findDaemonBinaries('${IMAGE_DRIVER_ROOT}'));
            const persistenced = plan.daemons.find((d) => d.name === 'nvidia-persistenced');
            const dir = await linkRunDir(persistenced.runDir, copy);
            const server = net.createServer((s) => s.end('answered'));
            await new Promise((resolve) => server.listen(persistenced.runDir.path + '/socket', resolve));
            const answer = await new Promise((resolve, reject) => {
              let text = '';
              // Relative to the copy: its absolute path is longer than a socket address may be (108 bytes).
              process.chdir(copy);
              const c = net.connect('.' + persistenced.runDir.inRoot + '/socket');
              c.on('data', (d) => { text += d; });
              c.on('end', () => resolve(text));
              c.on('error', reject);
            });
            server.close();
            console.log(JSON.stringify({ copy, runDir: persistenced.runDir, pidFile: persistenced.pidFile, dir, resolved: await realpath(persistenced.runDir.path), answer }));
          "`,
        );
        const seen = JSON.parse(out.trim().split('\n').at(-1) ?? '') as { copy: string; runDir: unknown; pidFile: string; dir: string; resolved: string; answer: string };
        console.info(`driver root of ${flavour.name}: nvidia-persistenced's run dir: ${JSON.stringify(seen)}`);
        expect(seen.copy).toMatch(/^\/var\/lib\/driver-rollout\/cache\/driver-root\/gpu\/[0-9a-f]{32}$/);
        expect(seen.runDir).toEqual({ path: '/var/run/nvidia-persistenced', inRoot: '/var/run/nvidia-persistenced' });
        expect(seen.pidFile).toBe('/var/run/nvidia-persistenced/nvidia-persistenced.pid');
        // Inside the copy: the socket and the pid file persistenced writes there are in the root as published.
        expect(seen.dir.startsWith(`${seen.copy}/`)).toBe(true);
        expect(seen.resolved).toBe(seen.dir);
        expect(seen.answer).toBe('answered');
      },
    );

    it.runIf(flavour.userSpacePackages.length > 0)('answers every binary the toolkit looks up on its PATH, and nvidia-smi runs chrooted there (it then finds no driver)', async () => {
      for (const binary of TOOLKIT_BINARIES) {
        const hits = [];
        for (const dir of TOOLKIT_BINARY_DIRS) {
          const resolved = await resolveInRoot(root, `${dir}/${binary}`);
          if (resolved !== undefined) hits.push(resolved);
        }
        expect(hits.length, `${binary} under ${TOOLKIT_BINARY_DIRS.join(':')}`).toBeGreaterThan(0);
        expect(((await stat(join(root, hits[0] ?? ''))).mode & 0o111) !== 0, `${binary} is executable`).toBe(true);
      }
      expect(await resolveInRoot(root, '/usr/bin/nvidia-smi')).toBe('/usr/lib/nvidia/current/nvidia-smi');
      // NVIDIA's validator looks from outside the root (Go's EvalSymlinks on <root>/usr/bin/nvidia-smi
      // and <root>/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1): the links resolve there too.
      expect(await realpath(join(root, 'usr/bin/nvidia-smi'))).toBe(join(root, 'usr/lib/nvidia/current/nvidia-smi'));
      expect(await realpath(join(root, 'usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1'))).toBe(join(root, `usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.${flavour.driverVersion}`));
      // No NVIDIA driver on this machine: nvidia-smi links and starts, then says so (exit 9).
      const smi = await execa('chroot', [root, '/usr/bin/nvidia-smi'], { reject: false });
      expect(smi.exitCode).toBe(9);
      expect(smi.stdout).toContain("couldn't communicate with the NVIDIA driver");
    });
  });
});
