import { createHash } from 'node:crypto';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * kbuild outputs that may sit in a source tree (from a manual build) and must neither be copied
 * into the build copy nor change the digest.
 */
export function isKbuildOutput(name: string): boolean {
  return (
    /\.(ko|o|mod|mod\.c|cmd|a|order|symvers|dwo)$/.test(name) ||
    name === 'Module.symvers' ||
    name === 'modules.order' ||
    name === '.tmp_versions'
  );
}

/**
 * sha256 over every file of a source tree: relative path, kind and content, in sorted order,
 * so the same tree digests the same wherever it lies. Symlinks digest their target text.
 */
export async function digestSourceTree(root: string): Promise<string> {
  const hash = createHash('sha256');
  for (const entry of await listSourceFiles(root)) {
    const path = join(root, entry.relativePath);
    if (entry.kind === 'symlink') {
      hash.update(`L ${entry.relativePath}\0${await readlink(path)}\0`);
    } else {
      const content = await readFile(path);
      hash.update(`F ${entry.relativePath}\0${content.length}\0`);
      hash.update(content);
    }
  }
  return hash.digest('hex');
}

export interface SourceFile {
  readonly relativePath: string;
  readonly kind: 'file' | 'symlink';
}

export async function listSourceFiles(root: string): Promise<SourceFile[]> {
  const out: SourceFile[] = [];
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (isKbuildOutput(entry.name)) continue;
    const relativePath = join(entry.parentPath, entry.name).slice(root.length).replace(/^\/+/, '');
    if (relativePath.split('/').some(isKbuildOutput)) continue;
    if (entry.isFile()) out.push({ relativePath, kind: 'file' });
    else if (entry.isSymbolicLink()) out.push({ relativePath, kind: 'symlink' });
  }
  return out.sort((a, b) => (a.relativePath < b.relativePath ? -1 : a.relativePath > b.relativePath ? 1 : 0));
}
