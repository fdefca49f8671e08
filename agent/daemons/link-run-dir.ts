import { mkdir, readlink, rm, symlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { makeDirInRoot } from '../root/make-dir-in-root.ts';
import { DriverRootError } from '../root/driver-root.ts';
import type { DaemonRunDir } from './plan/plan-gpu-daemons.ts';

/**
 * Makes a daemon's run dir (`/var/run/nvidia-persistenced`, where it writes its pid file and
 * socket) a symlink to that directory inside the driver root's copy (`<copy>/var/run/...`, made
 * when missing), so that the socket is in the root as published, where NVIDIA's container toolkit
 * looks. Whatever was at the path (a directory an earlier start made, a link to an older copy) is
 * replaced; call it before the daemon starts. Resolves the directory in the copy.
 */
export async function linkRunDir(runDir: DaemonRunDir, root: string): Promise<string> {
  try {
    const target = await makeDirInRoot(root, runDir.inRoot);
    if ((await readlink(runDir.path).catch(() => undefined)) === target) return target;
    await rm(runDir.path, { recursive: true, force: true });
    await mkdir(dirname(runDir.path), { recursive: true });
    await symlink(target, runDir.path);
    return target;
  } catch (error) {
    if (error instanceof DriverRootError) throw error;
    throw new DriverRootError(`cannot make ${runDir.path} resolve into the driver root ${root} (${runDir.inRoot})`, { path: runDir.path, root }, { cause: error });
  }
}
