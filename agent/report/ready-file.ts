import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * The ready file other DaemonSets wait for on the host (like the GPU Operator's
 * `/run/nvidia/validations/.driver-ctr-ready`). Readers see either no file or a whole one:
 * it is written to a temporary name in the same directory and renamed, which is atomic on
 * one file system. Its content is JSON describing what is loaded, for people and scripts.
 */
export async function writeReadyFile(path: string, content: Readonly<Record<string, unknown>>): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, `${JSON.stringify(content)}\n`, { mode: 0o644 });
  await rename(tmp, path);
}

export async function removeReadyFile(path: string): Promise<void> {
  await rm(path, { force: true });
}

/** For the last moments of the process (an uncaught error), where nothing async can run. */
export function removeReadyFileSync(path: string): void {
  rmSync(path, { force: true });
}
