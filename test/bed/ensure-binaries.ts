import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Returns the directory holding the pinned control-plane binaries, building them first when the
 * cache is cold (minutes; build-binaries.sh prints its progress on stderr, passed through here).
 */
export async function ensureBinaries(): Promise<string> {
  const script = join(import.meta.dirname, 'build-binaries.sh');
  const child = run('bash', [script], { maxBuffer: 16 * 1024 * 1024 });
  child.child.stderr?.pipe(process.stderr);
  const { stdout } = await child;
  const lines = stdout.trim().split('\n');
  const binDir = lines[lines.length - 1];
  if (binDir === undefined || binDir === '') throw new Error('build-binaries.sh printed no bin directory');
  return binDir;
}
