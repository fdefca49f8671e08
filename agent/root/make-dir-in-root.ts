import { lstat, mkdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { ifExists } from '../../shared/fs/if-exists.ts';
import { DriverRootError } from './driver-root.ts';

const MAX_LINKS = 16;

/**
 * `mkdir -p inRoot` as a process chrooted into `root` would run it: every symlink on the way is
 * followed inside the root (an absolute target taken relative to it, `..` never above it; a root
 * with Debian's `var/run -> /run` gets `<root>/run/...`), and missing directories are made.
 * Returns the directory as the agent reaches it (under `root`).
 */
export async function makeDirInRoot(root: string, inRoot: string): Promise<string> {
  const names = (path: string) => path.split('/').filter((p) => p !== '' && p !== '.');
  let pending = names(inRoot);
  let at: string[] = [];
  let links = 0;
  for (let name = pending.shift(); name !== undefined; name = pending.shift()) {
    if (name === '..') {
      at.pop();
      continue;
    }
    const path = join(root, ...at, name);
    const info = await ifExists(() => lstat(path));
    if (info?.isSymbolicLink() === true) {
      if (++links > MAX_LINKS) throw new DriverRootError(`${join(root, inRoot)}: more than ${MAX_LINKS} symlinks on the way`, { root, path: inRoot });
      const target = await readlink(path);
      if (target.startsWith('/')) at = [];
      pending = [...names(target), ...pending];
      continue;
    }
    if (info === undefined) await mkdir(path);
    else if (!info.isDirectory()) throw new DriverRootError(`${path} is in the way of ${inRoot} in the driver root ${root}: not a directory`, { root, path: inRoot });
    at.push(name);
  }
  return join(root, ...at);
}
