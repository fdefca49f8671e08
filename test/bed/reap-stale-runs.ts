import { execFile } from 'node:child_process';
import { access, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { killGroup } from './supervised-process.ts';

export const WORK_DIR_PREFIX = 'driver-rollout-bed-';

/**
 * Kills what an earlier, interrupted run left behind: every work dir whose owner process is
 * gone has its recorded process groups killed and is removed. supervise.sh already ends
 * components when their owner dies; this is the backstop for anything that outlived it.
 */
export async function reapStaleRuns(root: string = tmpdir()): Promise<number> {
  let reaped = 0;
  for (const entry of await readdir(root)) {
    if (!entry.startsWith(WORK_DIR_PREFIX)) continue;
    const dir = join(root, entry);
    const owner = Number.parseInt(await readOr(join(dir, 'owner'), ''), 10);
    if (Number.isInteger(owner) && isAlive(owner)) continue;
    for (const line of (await readOr(join(dir, 'pids'), '')).split('\n')) {
      const pgid = Number.parseInt(line, 10);
      if (Number.isInteger(pgid) && pgid > 1) killGroup(pgid, 'SIGKILL');
    }
    // A real node's host effects (mounts, cgroups, sysctls) are undone by its own script.
    const teardown = join(dir, 'teardown.sh');
    if (await access(teardown).then(() => true, () => false)) {
      await promisify(execFile)('bash', [teardown]).catch((error: unknown) => {
        process.stderr.write(`[test-bed] ${teardown} failed: ${error instanceof Error ? error.message : String(error)}\n`);
      });
    }
    await rm(dir, { recursive: true, force: true });
    reaped++;
  }
  return reaped;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readOr(path: string, fallback: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return fallback;
  }
}
