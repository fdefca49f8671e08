import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Returns the directory holding the pinned control-plane binaries, building them first when the
 * cache is cold (minutes; build-binaries.sh prints its progress on stderr, passed through here).
 */
export async function ensureBinaries(): Promise<string> {
  return await runCachedBuild(join(import.meta.dirname, 'build-binaries.sh'));
}

/**
 * Runs one of the test bed's cached build scripts (warm: at once) with its progress on stderr
 * and returns the path it prints on its last line.
 */
export async function runCachedBuild(script: string): Promise<string> {
  const child = run('bash', [script], { maxBuffer: 16 * 1024 * 1024 });
  child.child.stderr?.pipe(process.stderr);
  const { stdout } = await child;
  const lines = stdout.trim().split('\n');
  const path = lines[lines.length - 1];
  if (path === undefined || path === '') throw new Error(`${script} printed no path`);
  return path;
}
