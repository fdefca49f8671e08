import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import { createAgentSteps } from '../../agent/create-agent-steps.ts';
import { describeFailure } from '../../agent/describe-failure.ts';
import { fixedHostInfo } from '../../agent/detect/host-info.ts';
import { checkUserSpace, readModuleFileVersions } from '../../agent/user-space/check-user-space.ts';
import { readUserSpaceVersions } from '../../agent/user-space/read-user-space-versions.ts';
import { UserSpaceMismatchError } from '../../agent/user-space/user-space-errors.ts';
import { buildFlavourModules, vendorPackage, type FlavourModules } from '../../drivers/build-flavour-modules.ts';
import { driverFlavour } from '../../drivers/flavours.ts';
import { createLogger } from '../../shared/logger.ts';
import { SimulatedKernel } from '../doubles/simulated-kernel.ts';
import { aGpuNode } from '../fixtures/sysfs/sysfs-tree.ts';
import { DEBIAN_LIBS as LIBS, debianLibraryReadings } from '../unit/agent/user-space/debian-layout.ts';

// The version guard on Debian's real files: a driver root unpacked from bookworm-security's
// 535.309.01 user space (libcuda1, libnvidia-ml1, libnvidia-cfg1, nvidia-smi, as
// scripts/ensure-vendor-packages.sh fetches them), set against the open 535.261.03 modules (the
// nvidia-open flavour, built for 6.1.0-50 by the agent's dkms recipe) and the proprietary
// 535.309.01 ones (the nvidia flavour, 6.1.0-56). nvidia-smi is Debian's binary, run with -h.

const USER_SPACE = ['libcuda1', 'libnvidia-ml1', 'libnvidia-cfg1', 'nvidia-smi'];
const RELEASE_309 = '535.309.01-0+deb12u1';
const log = createLogger('test', 'silent');

let work: string;
let root: string;
let open: FlavourModules;
let proprietary: FlavourModules;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'version-guard-'));
  root = join(work, 'driver-root');
  // Unpacked into one root, as dpkg would (no maintainer scripts, no update-alternatives).
  for (const name of USER_SPACE) await cp(join((await vendorPackage(name, RELEASE_309)).dir, 'root'), root, { recursive: true, verbatimSymlinks: true });
  open = await buildFlavourModules(driverFlavour('nvidia-open'), '6.1.0-50-amd64');
  proprietary = await buildFlavourModules(driverFlavour('nvidia'), '6.1.0-56-amd64');
}, 3_600_000);
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

describe("the version guard on Debian's packages", () => {
  it('reads 535.309.01 from the libraries the soname links resolve to and from nvidia-smi itself', async () => {
    const found = await readUserSpaceVersions(root);
    expect(found.libraries).toEqual(debianLibraryReadings('535.309.01'));
    expect(found.nvidiaSmi).toEqual({ name: 'nvidia-smi', what: '/usr/lib/nvidia/current/nvidia-smi', version: '535.309.01' });
  });

  it('reads each module version with modinfo from the .ko files', async () => {
    expect(new Set((await readModuleFileVersions(open.built.modules)).map((r) => r.version))).toEqual(new Set(['535.261.03']));
    expect(new Set((await readModuleFileVersions(proprietary.built.modules)).map((r) => r.version))).toEqual(new Set(['535.309.01']));
  });

  it('refuses 535.309.01 libraries against 535.261.03 modules: UserSpaceMismatch naming both', async () => {
    const error = await checkUserSpace('gpu', root, await readModuleFileVersions(open.built.modules)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserSpaceMismatchError);
    const { reason, message } = describeFailure('load', error);
    expect(reason).toBe('UserSpaceMismatch');
    expect(message).toBe(
      `Failed: the gpu driver's user space in ${root} is not of its modules' release: modules 535.261.03, user space 535.309.01 (` +
        `/${LIBS}/libcuda.so.1 -> libcuda.so.535.309.01, /${LIBS}/libnvidia-cfg.so.1 -> libnvidia-cfg.so.535.309.01, /${LIBS}/libnvidia-ml.so.1 -> libnvidia-ml.so.535.309.01, /usr/lib/nvidia/current/nvidia-smi); ` +
        'nothing was unloaded (use an image whose libraries and nvidia-smi come from the modules\' release)',
    );
  });

  it('passes the same root against the 535.309.01 modules of its own release', async () => {
    await expect(checkUserSpace('gpu', root, await readModuleFileVersions(proprietary.built.modules))).resolves.toMatchObject({ root });
  });

  it("the agent's load step refuses before it touches the kernel: nothing installed, unloaded or loaded", async () => {
    const node = join(work, 'node');
    const sysfsRoot = await aGpuNode().writeTo(join(node, 'sys'));
    const config = parseAgentConfig([], {
      NODE_NAME: 'n1',
      POD_NAME: 'gpu-driver-1',
      POD_NAMESPACE: 'driver-rollout',
      DRIVER_NAME: 'gpu',
      DRIVER_VERSION: '535.261.03',
      DRIVER_SOURCE_DIR: open.sourceDir,
      KERNEL_VERSION: '6.1.0-50-amd64',
      LOAD_PLAN: 'nvidia',
      SYSFS_ROOT: sysfsRoot,
      MODULE_ROOT: join(node, 'root'),
      MODPROBE_CONFIG_DIR: join(node, 'modprobe.d'),
      CACHE_DIR: join(node, 'cache'),
      READY_FILE: join(node, '.driver-ready'),
      LOCK_PATH: join(node, 'agent.lock'),
      DRIVER_ROOT_DIR: root,
    });
    const kernel = new SimulatedKernel({ sysModuleDir: join(sysfsRoot, 'module'), runningKernelVersion: '6.1.0-50-amd64' });
    const steps = createAgentSteps(config, kernel, fixedHostInfo({ kernelRelease: '6.1.0-50-amd64', distro: 'debian', distroRelease: '12', arch: 'x64' }), log);
    await expect(steps.load(open.built, new AbortController().signal)).rejects.toThrow(UserSpaceMismatchError);
    expect(kernel.history).toEqual([]);
    expect(await readdir(node)).toEqual(['sys']);
  });
});
