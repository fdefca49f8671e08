import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startControlPlane } from '../../bed/control-plane.ts';
import { waitUntil } from '../../bed/wait-until.ts';

const repoRoot = join(import.meta.dirname, '..', '..', '..');

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('test-bed isolation', () => {
  it('runs two control planes at once on different ports and work dirs', async () => {
    const [a, b] = await Promise.all([startControlPlane({ profile: 'api' }), startControlPlane({ profile: 'api' })]);
    try {
      expect(a.server).not.toBe(b.server);
      expect(a.workDir).not.toBe(b.workDir);
      const { CoreV1Api } = await import('@kubernetes/client-node');
      await a.kubeConfig().makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'only-in-a' } } });
      const inB = (await b.kubeConfig().makeApiClient(CoreV1Api).listNamespace()).items.map((n) => n.metadata?.name);
      expect(inB).not.toContain('only-in-a');
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    expect(existsSync(a.workDir)).toBe(false);
  });

  it('leaves no process behind when the test runner is killed with SIGKILL', async () => {
    // A separate runner starts a control plane, prints its work dir, and is then killed.
    const runner = spawn(join(repoRoot, 'node_modules', '.bin', 'node'), ['--input-type=module', '-e', `
      const { startControlPlane } = await import(${JSON.stringify(join(repoRoot, 'test/bed/control-plane.ts'))});
      const plane = await startControlPlane({ profile: 'api' });
      console.log(plane.workDir);
      setInterval(() => {}, 1000);
    `], { stdio: ['ignore', 'pipe', 'inherit'] });
    const workDir = await new Promise<string>((resolve, reject) => {
      runner.stdout.on('data', (chunk: Buffer) => { resolve(chunk.toString().trim()); });
      runner.on('exit', (code) => { reject(new Error(`runner exited early (${String(code)})`)); });
    });
    const pids = (await readFile(join(workDir, 'pids'), 'utf8')).trim().split('\n').map(Number);
    expect(pids.length).toBe(2);
    expect(pids.every(isAlive)).toBe(true);

    runner.kill('SIGKILL');

    await waitUntil('every test-bed process to end', () => Promise.resolve(pids.some(isAlive) ? undefined : true), { timeoutMs: 15_000 });
  });
});
