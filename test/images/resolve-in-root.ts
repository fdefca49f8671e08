import { lstat, readlink } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { execa } from 'execa';

/**
 * A path as a process chrooted into `root` sees it: every symlink on the way followed, absolute
 * targets taken inside `root` (update-alternatives' links are absolute). Returns the path inside
 * the root, or undefined when something on the way is missing.
 */
export async function resolveInRoot(root: string, path: string, hops = 40): Promise<string | undefined> {
  const parts = posix.normalize(path).split('/').filter((p) => p !== '');
  let resolved = '/';
  for (const [i, part] of parts.entries()) {
    const candidate = posix.join(resolved, part);
    const info = await lstat(join(root, candidate)).catch(() => undefined);
    if (info === undefined) return undefined;
    if (info.isSymbolicLink()) {
      if (hops === 0) return undefined;
      const target = await readlink(join(root, candidate));
      const rest = parts.slice(i + 1).join('/');
      const next = target.startsWith('/') ? target : posix.join(dirname(candidate), target);
      return resolveInRoot(root, posix.join(next, rest), hops - 1);
    }
    resolved = candidate;
  }
  return resolved;
}

/** The root's ld.so.cache as `ldconfig -p` prints it: library name to the path it names (in the root). */
export async function readLdCache(root: string): Promise<Map<string, string>> {
  const { stdout } = await execa('ldconfig', ['-C', join(root, 'etc', 'ld.so.cache'), '-p']);
  const entries = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const m = /^\s+(\S+) \(([^)]*)\) => (\S+)$/.exec(line);
    if (m?.[1] !== undefined && m[3] !== undefined && m[2]?.includes('x86-64') === true) entries.set(m[1], m[3]);
  }
  return entries;
}
