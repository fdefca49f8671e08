import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkUserSpace } from '../../../../agent/user-space/check-user-space.ts';
import { findBinary, readUserSpaceVersions } from '../../../../agent/user-space/read-user-space-versions.ts';
import { UserSpaceMismatchError, UserSpaceUnreadableError } from '../../../../agent/user-space/user-space-errors.ts';
import { describeFailure } from '../../../../agent/describe-failure.ts';
import { DEBIAN_LIBS as LIBS, debianLibraryReadings } from './debian-layout.ts';

// Driver roots laid out as Debian's packages install them (libraries under
// usr/lib/x86_64-linux-gnu/nvidia/current/, nvidia-smi under usr/lib/nvidia/current/), with empty
// library files and a shell script STANDING IN for nvidia-smi that prints its `-h` banner. The
// real packages are read in test/vendor-drivers/user-space-version-guard.test.ts.

let work: string;
let count = 0;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'user-space-'));
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});


async function aDebianRoot(version: string, over: { smiVersion?: string; smiBanner?: string; libraries?: readonly string[] } = {}): Promise<string> {
  const root = join(work, `root-${++count}`);
  await mkdir(join(root, LIBS), { recursive: true });
  for (const lib of over.libraries ?? ['libcuda', 'libnvidia-ml', 'libnvidia-cfg']) {
    await writeFile(join(root, LIBS, `${lib}.so.${version}`), '');
    await symlink(`${lib}.so.${version}`, join(root, LIBS, `${lib}.so.1`));
  }
  await mkdir(join(root, 'usr/lib/nvidia/current'), { recursive: true });
  const banner = over.smiBanner ?? `NVIDIA System Management Interface -- v${over.smiVersion ?? version}`;
  await writeFile(join(root, 'usr/lib/nvidia/current/nvidia-smi'), `#!/bin/sh\n# stand-in for nvidia-smi\necho '${banner}'\n`, { mode: 0o755 });
  // update-alternatives' absolute link, as an installed Debian root has it.
  await mkdir(join(root, 'usr/bin'), { recursive: true });
  await mkdir(join(root, 'etc/alternatives'), { recursive: true });
  await symlink('/usr/lib/nvidia/current/nvidia-smi', join(root, 'etc/alternatives/nvidia-smi'));
  await symlink('/etc/alternatives/nvidia-smi', join(root, 'usr/bin/nvidia-smi'));
  return root;
}

const modules = (version: string) => [{ name: 'nvidia', what: 'nvidia.ko (modinfo)', version }];

describe('readUserSpaceVersions: versions from the files themselves', () => {
  it("reads each soname link's file version and nvidia-smi's banner", async () => {
    const root = await aDebianRoot('535.309.01');
    const found = await readUserSpaceVersions(root);
    expect(found.libraries).toEqual(debianLibraryReadings('535.309.01'));
    expect(found.nvidiaSmi).toEqual({ name: 'nvidia-smi', what: '/usr/lib/nvidia/current/nvidia-smi', version: '535.309.01' });
    expect(found.libraryDir).toEqual({ inRoot: `/${LIBS}`, path: join(root, LIBS) });
  });

  it("resolves absolute links inside the root (update-alternatives), never on the agent's own /", async () => {
    const root = await aDebianRoot('535.309.01');
    // Only /usr/bin/nvidia-smi is where the agent looks: the program sits in a directory it does not search.
    await rm(join(root, 'usr/lib/nvidia/current'), { recursive: true });
    await mkdir(join(root, 'usr/lib/nvidia/535'), { recursive: true });
    await writeFile(join(root, 'usr/lib/nvidia/535/nvidia-smi'), "#!/bin/sh\necho 'NVIDIA System Management Interface -- v535.309.01'\n", { mode: 0o755 });
    await rm(join(root, 'etc/alternatives/nvidia-smi'));
    await symlink('/usr/lib/nvidia/535/nvidia-smi', join(root, 'etc/alternatives/nvidia-smi'));
    expect(await findBinary(root, 'nvidia-smi')).toEqual({ inRoot: '/usr/bin/nvidia-smi', path: join(root, 'usr/lib/nvidia/535/nvidia-smi') });
    expect((await readUserSpaceVersions(root)).nvidiaSmi).toEqual({ name: 'nvidia-smi', what: '/usr/bin/nvidia-smi', version: '535.309.01' });
  });

  it('an nvidia-smi that prints no version is UserSpaceUnreadable, naming it', async () => {
    const root = await aDebianRoot('535.309.01', { smiBanner: 'error while loading shared libraries: libc.so.6' });
    const error = await readUserSpaceVersions(root).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserSpaceUnreadableError);
    expect(describeFailure('load', error)).toEqual({ reason: 'UserSpaceUnreadable', message: `Failed: ${join(root, 'usr/lib/nvidia/current/nvidia-smi')} -h printed no version (exit 0: error while loading shared libraries: libc.so.6)` });
  });
});

describe('checkUserSpace: the version guard', () => {
  it('passes a root of the modules\' release', async () => {
    const root = await aDebianRoot('535.309.01');
    await expect(checkUserSpace('gpu', root, modules('535.309.01'))).resolves.toMatchObject({ root });
  });

  it('refuses another release with UserSpaceMismatch, naming both versions', async () => {
    const root = await aDebianRoot('535.309.01');
    const error = await checkUserSpace('gpu', root, modules('535.261.03')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserSpaceMismatchError);
    const { reason, message } = describeFailure('load', error);
    expect(reason).toBe('UserSpaceMismatch');
    expect(message).toContain(`the gpu driver's user space in ${root} is not of its modules' release: modules 535.261.03, user space 535.309.01 (/${LIBS}/libcuda.so.1 -> libcuda.so.535.309.01,`);
    expect(message).toContain('nothing was unloaded');
  });

  it('refuses an nvidia-smi of another release among matching libraries', async () => {
    const root = await aDebianRoot('535.309.01', { smiVersion: '535.261.03' });
    await expect(checkUserSpace('gpu', root, modules('535.309.01'))).rejects.toThrow('modules 535.309.01, user space 535.261.03 (/usr/lib/nvidia/current/nvidia-smi)');
  });

  it('refuses a root without libcuda', async () => {
    const root = await aDebianRoot('535.309.01', { libraries: ['libnvidia-ml'] });
    await expect(checkUserSpace('gpu', root, modules('535.309.01'))).rejects.toThrow('modules 535.309.01, missing libcuda.so.1');
  });
});
