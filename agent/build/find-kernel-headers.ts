import { join } from 'node:path';
import { KernelHeadersMissingError } from './build-errors.ts';
import { pathExists } from '../../shared/fs/if-exists.ts';

/**
 * Where kbuild trees are looked for, in order: the `build` link that the kernel's package
 * installs next to its modules, then Debian's headers directory (the link dangles when only
 * the image package is installed, or when /lib/modules is the container's own).
 */
export function defaultHeadersDirs(kernelVersion: string): string[] {
  return [`/lib/modules/${kernelVersion}/build`, `/usr/src/linux-headers-${kernelVersion}`];
}

/** The first candidate that is a kbuild tree (has a Makefile and .config), or KernelHeadersMissingError. */
export async function findKernelHeaders(kernelVersion: string, candidates: readonly string[]): Promise<string> {
  for (const dir of candidates) {
    if ((await pathExists(join(dir, 'Makefile'))) && (await pathExists(join(dir, '.config')))) return dir;
  }
  throw new KernelHeadersMissingError(kernelVersion, candidates);
}
