import { readFile } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { findKernelHeaders } from './find-kernel-headers.ts';
import { pathExists } from '../../shared/fs/if-exists.ts';

/** The two halves of a kernel's build tree (one directory when the headers are not split). */
export interface KernelTrees {
  /** kbuild's output tree: .config, Module.symvers, generated headers (Debian: linux-headers-<kver>). */
  readonly output: string;
  /** The source tree the output's Makefile includes (Debian: linux-headers-<ver>-common). */
  readonly source: string;
}

/**
 * Pure: the source tree named by an output tree's Makefile. Debian's linux-headers-<kver>/Makefile
 * is one line, `include /usr/src/linux-headers-<ver>-common/Makefile`; kbuild's own out-of-tree
 * output Makefile (`make O=`) says `include <src>/Makefile` too. Undefined when the Makefile is
 * the kernel's full top-level one (source and output are the same directory).
 */
export function sourceTreeFromMakefile(text: string, outputDir: string): string | undefined {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  if (lines.length > 5) return undefined;
  for (const line of lines) {
    const match = /^include\s+(\S+)\/Makefile$/.exec(line);
    if (match?.[1] !== undefined) return isAbsolute(match[1]) ? match[1] : resolve(outputDir, match[1]);
  }
  return undefined;
}

/**
 * Finds the output tree among `candidates` (see findKernelHeaders) and its source tree: the
 * directory its Makefile includes, else the output tree itself. Works for any installed kernel,
 * whatever its version, since nothing is derived from the release string.
 */
export async function findKernelTrees(kernelVersion: string, candidates: readonly string[]): Promise<KernelTrees> {
  const output = await findKernelHeaders(kernelVersion, candidates);
  const source = sourceTreeFromMakefile(await readFile(join(output, 'Makefile'), 'utf8'), output);
  if (source !== undefined && (await pathExists(join(source, 'Makefile')))) return { output, source };
  return { output, source: output };
}

