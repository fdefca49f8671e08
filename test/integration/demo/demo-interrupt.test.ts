import { spawn } from 'node:child_process';
import { access, readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { waitUntil } from '../../bed/wait-until.ts';
import { hasExited } from '../../../shared/has-exited.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const NODE = join(ROOT, 'node_modules/.bin/node');

/** Pids of every process whose command line or environment mentions one of `paths`. */
async function processesMentioning(paths: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir('/proc')).filter((d) => /^\d+$/.test(d))) {
    if (pid === String(process.pid)) continue;
    const read = async (file: string): Promise<string> => readFile(join('/proc', pid, file), 'latin1').catch(() => '');
    const text = `${await read('cmdline')}\0${await read('environ')}`;
    if (paths.some((p) => text.includes(p))) found.push(`${pid}: ${(await read('cmdline')).replaceAll('\0', ' ').slice(0, 160)}`);
  }
  return found;
}

const exists = async (path: string): Promise<boolean> => access(path).then(() => true, () => false);

describe('npm start (the demo) interrupted', () => {
  // The demo starts a control plane and 17 Node.js processes: minutes on a loaded 2-core machine.
  it('stops everything it started and removes its files on SIGINT, with the agents running', { timeout: 600_000 }, async () => {
    const child = spawn(NODE, [join(ROOT, 'demo/main.ts')], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    // Should the test end early (a timeout), the demo must not outlive it: its stdout would be a
    // broken pipe and its SIGINT handler could not finish.
    onTestFinished(() => {
      if (!hasExited(child)) child.kill('SIGINT');
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const exited = new Promise<number | null>((settle) => child.on('exit', (code) => {
      settle(code);
    }));
    try {
      await waitUntil('the demo to start the coordinator and the agents', () => Promise.resolve(out.includes('coordinator, init containers and agents running') ? true : undefined), { timeoutMs: 240_000, intervalMs: 200 });
      // Let the first nodes move, so that init containers, agents and kbuild are all under way.
      await waitUntil('a node to start its safe load', () => Promise.resolve(/cordon|drain|pod-restart/.test(out.split('agents running')[1] ?? '') ? true : undefined), { timeoutMs: 300_000, intervalMs: 200 });
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(130);
    const work = /work dir (\S+);/.exec(out)?.[1];
    const plane = /export KUBECONFIG=(\S+)\/admin\.kubeconfig/.exec(out)?.[1];
    expect(work).toBeDefined();
    expect(plane).toBeDefined();
    const dirs = [work ?? '', plane ?? ''];
    expect(out).toContain('[demo] stopped');
    // The control plane's supervisors end their components within a second or two (longer under load).
    await waitUntil('every demo process to be gone', async () => ((await processesMentioning(dirs)).length === 0 ? true : undefined), { timeoutMs: 60_000, intervalMs: 250 })
      .catch(async (error: unknown) => {
        throw new Error(`still running after SIGINT:\n${(await processesMentioning(dirs)).join('\n')}`, { cause: error });
      });
    expect(await exists(work ?? '')).toBe(false);
    expect(await exists(plane ?? '')).toBe(false);
  });
});
