import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The path of the pinned helm binary (test/bed/versions.env HELM_VERSION), building it from Go
 * modules first when the cache is cold (minutes; build-helm.sh prints its progress on stderr).
 */
export async function ensureHelm(): Promise<string> {
  const child = run('bash', [join(import.meta.dirname, 'build-helm.sh')], { maxBuffer: 16 * 1024 * 1024 });
  child.child.stderr?.pipe(process.stderr);
  const { stdout } = await child;
  const helm = stdout.trim().split('\n').at(-1);
  if (helm === undefined || helm === '') throw new Error('build-helm.sh printed no helm path');
  return helm;
}
