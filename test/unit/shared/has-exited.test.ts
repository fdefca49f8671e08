/**
 * A child process that has exited is told from one that runs: one killed by
 * a signal has exited too (exitCode stays null). Stopping a pod whose container was SIGKILLed from
 * outside waited for a 'close' event that had already gone by, and `npm run chaos` ended with an
 * unsettled await after agents-killed (seed 112429).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { hasExited } from '../../../shared/has-exited.ts';

function sleeper() {
  return spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
}

describe('hasExited', () => {
  it('is false while the process runs', async () => {
    const child = sleeper();
    await once(child, 'spawn');
    expect(hasExited(child)).toBe(false);
    child.kill('SIGKILL');
    await once(child, 'close');
  });

  it('is true once the process was killed by a signal (no exit code)', async () => {
    const child = sleeper();
    await once(child, 'spawn');
    child.kill('SIGKILL');
    await once(child, 'close');
    expect(child.exitCode).toBeNull();
    expect(hasExited(child)).toBe(true);
  });

  it('is true once the process exited with a code', async () => {
    const child = spawn(process.execPath, ['-e', 'process.exit(3)'], { stdio: 'ignore' });
    await once(child, 'close');
    expect(hasExited(child)).toBe(true);
  });
});
